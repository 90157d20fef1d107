// gatedDeltaNet's kernels on each backend (ops/gated-delta-net.ts validates and calls them). On WebGPU, one dispatch
// per layer for a decode step, the chunked WY / UT form (four dispatches) for long prompts. Returns float32
// [S, Hv dv], the gated-normed delta-rule output, and updates both states.
import type { Operand } from '../../runtime/backend.js';
import { defineOpKernels } from '../op-kernels.js';
import { gatedDeltaNetReference } from './cpu.js';
import { gatedDeltaNetKernel } from './webgpu.js';

/**
 * One Gated DeltaNet layer's token mixing after its projections: the causal depthwise conv
 * with SiLU over q|k|v continued from the conv state, l2-normalised q and k, the gated delta rule continued from the
 * recurrent state, and the gated RMSNorm of each value head's output with silu(z). Both states are read and
 * rewritten in place.
 */
export interface GatedDeltaNetArgs<H> {
  // qkv, z, b and a are views of one buffer in one dtype, and so are aLog, dtBias and normWeight (the op packs them
  // when they are apart), so a kernel binds each group once.
  /** [S, 2 Hk dk + Hv dv] rows (unit column stride, any row stride): q | k | v before the conv. */
  readonly qkv: Operand<H>;
  /** [S, Hv dv]: the output gate of the norm. */
  readonly z: Operand<H>;
  /** [S, Hv]: beta = sigmoid(b). */
  readonly b: Operand<H>;
  /** [S, Hv]: g = -exp(A_log) softplus(a + dt_bias). */
  readonly a: Operand<H>;
  /** [C, K] conv taps (C = 2 Hk dk + Hv dv), the last one on the current token. */
  readonly convWeight: Operand<H>;
  readonly aLog: Operand<H>;
  readonly dtBias: Operand<H>;
  /** [dv]: the gated norm's weight (used as is, not 1 + w). */
  readonly normWeight: Operand<H>;
  /**
   * Contiguous float32 [Hv, K-1, 2 dk + dv]: each value head's own copy of its conv inputs (q, k of its key head,
   * then its v); with segments, a pool [slots, Hv, K-1, 2 dk + dv].
   */
  readonly convState: Operand<H>;
  /** Contiguous float32 [Hv, dk, dv]; with segments, a pool [slots, Hv, dk, dv]. */
  readonly state: Operand<H>;
  /**
   * Several sequences in one call (continuous batching): int32 [3 * count], per segment its first row, its rows and
   * its slot in the state pools; the rows of a segment are consecutive and continue that slot's states.
   */
  readonly segments?: { readonly index: Operand<H>; readonly count: number };
  readonly keyHeads: number;
  readonly valueHeads: number;
  readonly keyDim: number;
  readonly valueDim: number;
  readonly eps: number;
}

export const gatedDeltaNetKernels = defineOpKernels<GatedDeltaNetArgs<unknown>>({
  cpu: (_backend, args) => gatedDeltaNetReference(args as GatedDeltaNetArgs<never>),
  webgpu: (backend, args) => gatedDeltaNetKernel(backend, args as GatedDeltaNetArgs<never>),
});
