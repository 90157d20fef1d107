// attentionInputs' kernels on each backend (ops/attention-inputs.ts validates and calls them): one layer's attention
// inputs from a fused q|k|v projection: per-head q/k RMSNorm, RoPE (all or the first rotaryDim dims), the new k and
// v rows written into the KV cache (contiguous or paged) at their positions, and q returned for attention.
import type { Operand, PagedKv } from '../../runtime/backend.js';
import { defineOpKernels } from '../op-kernels.js';
import { attentionInputsReference } from './cpu.js';
import { attentionInputsKernel } from './webgpu.js';

/** One layer's attention inputs from a fused q|k|v projection (see ops/attention-inputs.ts). */
export interface AttentionInputsArgs<H> {
  /** [S, (heads + 2 kvHeads) * headDim], rows with unit last stride. */
  readonly qkv: Operand<H>;
  /** [headDim] per-head RMSNorm weights of q and k (both or neither). */
  readonly qNorm?: Operand<H>;
  readonly kNorm?: Operand<H>;
  readonly eps: number;
  /** float32 RoPE tables [P, rotaryDim / 2], unit last stride. */
  readonly cos: Operand<H>;
  readonly sin: Operand<H>;
  /** KV caches [capacity, kvHeads, headDim], unit last stride, written in place at rows position + s. */
  readonly keys: Operand<H>;
  readonly values: Operand<H>;
  /** Row of token 0: this number plus, when given, the int32 value of positionFrom (a device scalar). */
  readonly position: number;
  readonly positionFrom?: Operand<H>;
  /** Paged caches: keys / values are the pools, each token's position and page table come from the index. */
  readonly pages?: PagedKv<H>;
  readonly heads: number;
  readonly kvHeads: number;
  readonly headDim: number;
  /**
   * R, even, 2 <= R <= headDim: rotate-half RoPE covers dims 0..R-1 (pairs c, c + R/2) and dims R..headDim-1 pass
   * through (after the norm). R = headDim is full rotary. Omitted: headDim.
   */
  readonly rotaryDim?: number;
}

export const attentionInputsKernels = defineOpKernels<AttentionInputsArgs<unknown>>({
  cpu: (_backend, args) => attentionInputsReference(args as AttentionInputsArgs<never>),
  webgpu: (backend, args) => attentionInputsKernel(backend, args as AttentionInputsArgs<never>),
});
