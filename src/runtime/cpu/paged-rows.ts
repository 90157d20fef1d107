// Paged KV caches on the CPU reference: each row's position and page table from the batch index (backend.ts PagedKv).
import { allocStorage, type StorageArray } from '../../core/codecs.js';
import type { Operand, PagedKv } from '../backend.js';
import { values } from './cpu-backend.js';

/** Row t's position and, for its sequence, the pool row of position j. */
export interface PagedRowView {
  position: number;
  poolRow(j: number): number;
}

/** The index's rows, decoded once. */
export function pagedRowViews(pages: PagedKv<StorageArray>, rows: number): PagedRowView[] {
  const index = values(pages.index);
  const p = pages.pageSize;
  return Array.from({ length: rows }, (_, t) => {
    const table = index[2 * t + 1];
    return { position: index[2 * t], poolRow: (j: number) => index[table + Math.floor(j / p)] * p + (j % p) };
  });
}

/** Positions 0..length-1 of a row's sequence gathered from a pool [rows, H, D] into a contiguous operand. */
export function gatherPagedRows(pool: Operand<StorageArray>, row: PagedRowView, length: number): Operand<StorageArray> {
  const { shape, strides, offset } = pool.view;
  const [, h, d] = shape;
  const out = allocStorage(pool.dtype, length * h * d);
  for (let j = 0; j < length; j++) {
    const r = row.poolRow(j);
    for (let a = 0; a < h; a++) {
      for (let c = 0; c < d; c++) out[(j * h + a) * d + c] = pool.handle[offset + r * strides[0] + a * strides[1] + c * strides[2]];
    }
  }
  return { handle: out, dtype: pool.dtype, view: { shape: [length, h, d], strides: [h * d, d, 1], offset: 0 } };
}
