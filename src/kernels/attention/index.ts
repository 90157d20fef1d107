// attention's kernels on each backend (ops/nn.ts validates and calls them): over a contiguous KV cache or a paged
// pool, with the gate of gated attention applied where the output is written.
import type { AttentionOptions, Operand, PagedKv } from '../../runtime/backend.js';
import { values } from '../../runtime/cpu/cpu-backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineOpKernels } from '../op-kernels.js';
import { attentionReference } from './cpu.js';
import { pagedAttentionReference } from './cpu-paged.js';
import { attentionKernel } from './webgpu.js';

/**
 * Scaled dot-product attention with grouped-query heads: q [Sq, Hq, D], k and v [Skv, Hkv, D] with Hq a multiple of
 * Hkv (query head h reads kv head floor(h / (Hq / Hkv))). With causal, query i sees keys j <= queryOffset + i (plus
 * queryOffsetFrom's value, an int32 on the device, when given). Softmax in float32; contiguous result [Sq, Hq, D] in
 * q's dtype. A query that sees no key gives zeros. `gate` [Sq, Hq, D] (any float dtype, any strides: usually a
 * column view of a wider projection) multiplies the result by sigmoid(gate) elementwise where it is written
 * (Qwen3.5's gated attention); NaN in it propagates. With `pages`, k and v are the pool and the page table says
 * which rows each query reads.
 */
export interface AttentionArgs<H> {
  readonly q: Operand<H>;
  readonly k: Operand<H>;
  readonly v: Operand<H>;
  readonly options: AttentionOptions;
  readonly queryOffsetFrom?: Operand<H>;
  readonly pages?: PagedKv<H>;
  readonly gate?: Operand<H>;
}

export const attentionKernels = defineOpKernels<AttentionArgs<unknown>>({
  cpu: (_backend, args) => {
    const { q, k, v, options, queryOffsetFrom, pages, gate } = args as AttentionArgs<never>;
    const offset = options.queryOffset + (queryOffsetFrom ? values(queryOffsetFrom)[0] : 0);
    if (pages) return pagedAttentionReference(q, k, v, options, pages, gate);
    return attentionReference(q, k, v, { ...options, queryOffset: offset }, gate);
  },
  webgpu: (backend, args) => {
    const { q, k, v, options, queryOffsetFrom, pages, gate } = args as AttentionArgs<never>;
    const g = toGpuOperand;
    return attentionKernel(backend, g(q), g(k), g(v), options, q.dtype, queryOffsetFrom && g(queryOffsetFrom), pages, gate && g(gate));
  },
});
