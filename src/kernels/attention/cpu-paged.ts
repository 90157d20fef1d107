// attention over a paged KV cache on the CPU reference: each query row against its own sequence's keys 0..position,
// gathered through its page table, by the contiguous reference.
import type { StorageArray } from '../../core/codecs.js';
import { allocStorage } from '../../core/codecs.js';
import type { AttentionOptions, Operand, PagedKv } from '../../runtime/backend.js';
import { gatherPagedRows, pagedRowViews } from '../../runtime/cpu/paged-rows.js';
import { attentionReference } from './cpu.js';

export function pagedAttentionReference(
  q: Operand<StorageArray>,
  k: Operand<StorageArray>,
  v: Operand<StorageArray>,
  options: AttentionOptions,
  pages: PagedKv<StorageArray>,
  gate?: Operand<StorageArray>,
): StorageArray {
  const [sq, hq, d] = q.view.shape;
  const out = allocStorage(q.dtype, sq * hq * d);
  pagedRowViews(pages, sq).forEach((row, i) => {
    const length = Math.min(row.position + 1, pages.maxLength);
    const qi: Operand<StorageArray> = { ...q, view: { shape: [1, hq, d], strides: q.view.strides, offset: q.view.offset + i * q.view.strides[0] } };
    const gi: Operand<StorageArray> | undefined = gate && {
      ...gate,
      view: { shape: [1, hq, d], strides: gate.view.strides, offset: gate.view.offset + i * gate.view.strides[0] },
    };
    const o = attentionReference(
      qi,
      gatherPagedRows(k, row, length),
      gatherPagedRows(v, row, length),
      { ...options, causal: true, queryOffset: length - 1 },
      gi,
    );
    out.set(o, i * hq * d);
  });
  return out;
}
