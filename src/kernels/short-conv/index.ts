// shortConv's kernels: LFM2's gated short convolution, on each backend (ops/short-conv.ts validates and calls it).
// Bx = B * x, y[t, c] = sum_k weight[c, k] * Bx[t - (L-1) + k, c] (rows before t = 0 from the state); returns C * y
// as float32 [S, H] and leaves the last L-1 Bx rows in the state.
import type { Operand } from '../../runtime/backend.js';
import { defineOpKernels } from '../op-kernels.js';
import { shortConvReference } from './cpu.js';
import { shortConvKernel } from './webgpu.js';

/** LFM2's gated short convolution's operands. */
export interface ShortConvArgs<H> {
  /** Contiguous [S, 3H]: the B, C and x thirds of in_proj's output. */
  readonly bcx: Operand<H>;
  /** [H, L]: each channel's L taps, the last one multiplying the current token. */
  readonly weight: Operand<H>;
  /** Contiguous float32 [L-1, H]: Bx of the L-1 tokens before these, read, then overwritten with the last L-1. */
  readonly state: Operand<H>;
  /** [H]: the conv's bias (conv_bias), added before the C gate. */
  readonly bias?: Operand<H>;
  /**
   * Several sequences in one call (continuous batching): int32 (first row, rows, state slot) per sequence, their
   * rows one after another in bcx; the state is then a pool [slots, L-1, H] and each sequence continues its slot.
   */
  readonly segments?: { readonly index: Operand<H>; readonly count: number };
}

export const shortConvKernels = defineOpKernels<ShortConvArgs<unknown>>({
  cpu: (_backend, args) => shortConvReference(args as ShortConvArgs<never>),
  webgpu: (backend, args) => shortConvKernel(backend, args as ShortConvArgs<never>),
});
