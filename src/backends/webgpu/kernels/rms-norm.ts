import type { AttentionOptions } from '../../backend.js';
import type { GpuBuffer, GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';

export function rmsNormKernel(ctx: GpuContext, x: GpuOperand, weight: GpuOperand | undefined, eps: number): GpuBuffer {
  throw new Error('rms-norm: not implemented yet');
}
