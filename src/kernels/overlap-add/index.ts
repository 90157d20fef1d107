// overlapAdd's kernels on each backend (ops/stft.ts calls them for istft).
import type { Operand } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineOpKernels } from '../op-kernels.js';
import { overlapAddReference } from './cpu.js';
import { overlapAddKernel } from './webgpu.js';

/**
 * Overlap-add of istft: frames [B, F, nFft] (float32 or any float view) times window [nFft], summed into
 * y[b, t] = sum_f frames[b, f, t + padLeft - f * hop] * window[..] / sum_f window[..]^2 over the frames that
 * cover t + padLeft, for t < length (0 where no frame covers it). Contiguous float32 [B, length].
 */
export interface OverlapAddArgs<H> {
  readonly frames: Operand<H>;
  readonly window: Operand<H>;
  readonly hop: number;
  readonly padLeft: number;
  readonly length: number;
}

export const overlapAddKernels = defineOpKernels<OverlapAddArgs<unknown>, unknown>({
  cpu: (_backend, args) => {
    const a = args as OverlapAddArgs<never>;
    return overlapAddReference(a.frames, a.window, a.hop, a.padLeft, a.length);
  },
  webgpu: (backend, args) => {
    const a = args as OverlapAddArgs<never>;
    return overlapAddKernel(backend, toGpuOperand(a.frames), toGpuOperand(a.window), a.hop, a.padLeft, a.length);
  },
});
