// resample's kernels on each backend (audio/resample.ts calls them): torchaudio's polyphase resampling.
import type { Operand } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineOpKernels } from '../op-kernels.js';
import { resampleReference } from './cpu.js';
import { resampleKernel } from './webgpu.js';

/**
 * Polyphase resampling (torchaudio's sinc-interpolation resample): kernel [P, W] (float32, P = new rate / gcd
 * phases) and signals x [B, T]: y[b, i] = sum_w kernel[i mod P, w] * x[b, (i div P) * stride - padLeft + w], with
 * positions outside [0, T) reading 0, for i < length. Contiguous float32 [B, length].
 */
export interface ResampleArgs<H> {
  readonly x: Operand<H>;
  readonly kernel: Operand<H>;
  readonly stride: number;
  readonly padLeft: number;
  readonly length: number;
}

export const resampleKernels = defineOpKernels<ResampleArgs<unknown>, unknown>({
  cpu: (_backend, args) => {
    const a = args as ResampleArgs<never>;
    return resampleReference(a.x, a.kernel, a.stride, a.padLeft, a.length);
  },
  webgpu: (backend, args) => {
    const a = args as ResampleArgs<never>;
    return resampleKernel(backend, toGpuOperand(a.x), toGpuOperand(a.kernel), a.stride, a.padLeft, a.length);
  },
});
