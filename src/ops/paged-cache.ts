// A batch of sequences' rows in a paged KV cache, as the attentionInputs and attention kernels read it: one int32
// index per step, built here on the host from each sequence's pages (backend.ts PagedKv has the layout), uploaded
// once and shared by every layer.
import { DTypeError, ShapeError } from '../core/errors.js';
import type { DeviceName } from '../runtime/backend.js';
import type { PagedKv } from '../runtime/backend.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from './creation.js';

/** The rows a batch puts in a paged pool: per row its position and page table (see pagedIndex). */
export interface PagedIndex {
  /** int32 [2 * rows + pages of all sequences]. */
  index: Tensor;
  pageSize: number;
  /** Token / query rows, the sequences' rows one after another. */
  rows: number;
  /** Positions of the longest sequence once these rows are in (attention's Skv). */
  maxLength: number;
}

/** One sequence's part of a batch: `rows` tokens at positions start.., its page numbers in order. */
export interface PagedRowsOf {
  readonly pages: readonly number[];
  readonly start: number;
  readonly rows: number;
}

export function pagedIndex(sequences: readonly PagedRowsOf[], pageSize: number, device: DeviceName): PagedIndex {
  if (!Number.isInteger(pageSize) || pageSize <= 0) throw new RangeError(`pagedIndex: pageSize must be a positive integer, got ${pageSize}`);
  const rows = sequences.reduce((a, s) => a + s.rows, 0);
  const data: number[] = new Array(2 * rows);
  let t = 0;
  let tableAt = 2 * rows;
  let maxLength = 0;
  for (const s of sequences) {
    if (!Number.isInteger(s.start) || s.start < 0 || !Number.isInteger(s.rows) || s.rows < 0) throw new RangeError(`pagedIndex: bad rows ${s.start}+${s.rows}`);
    const end = s.start + s.rows;
    if (end > s.pages.length * pageSize) throw new ShapeError(`pagedIndex: positions ${s.start}..${end - 1} do not fit ${s.pages.length} pages of ${pageSize}`);
    for (let r = 0; r < s.rows; r++, t++) {
      data[2 * t] = s.start + r;
      data[2 * t + 1] = tableAt;
    }
    data.push(...s.pages);
    tableAt += s.pages.length;
    maxLength = Math.max(maxLength, end);
  }
  return { index: tensor(data, { dtype: 'int32', device }), pageSize, rows, maxLength };
}

/** Checks an index against the rows it serves and a pool [rows, ...] whose rows it addresses in whole pages. */
export function checkPagedIndex(op: string, pages: PagedIndex, pool: Tensor, rows: number): void {
  const { index, pageSize } = pages;
  if (index.dtype !== 'int32' || index.ndim !== 1)
    throw new DTypeError(`${op}: the paged index must be a 1-D int32 tensor (from pagedIndex), got ${index.describe()}`);
  if (index.device !== pool.device) throw new ShapeError(`${op}: the paged index is on ${index.device}, the cache on ${pool.device}`);
  if (!Number.isInteger(pageSize) || pageSize <= 0 || pool.shape[0] % pageSize !== 0) {
    throw new ShapeError(`${op}: pageSize must be a positive integer dividing the pool's ${pool.shape[0]} rows, got ${pageSize}`);
  }
  if (pages.rows !== rows || index.shape[0] < 2 * rows) throw new ShapeError(`${op}: the paged index describes ${pages.rows} rows, the input has ${rows}`);
}

export function pagedKv(pages: PagedIndex): PagedKv<unknown> {
  return { index: pages.index.operand(), pageSize: pages.pageSize, maxLength: pages.maxLength };
}
