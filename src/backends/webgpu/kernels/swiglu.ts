import type { AttentionOptions } from '../../backend.js';
import type { GpuBuffer, GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';

export function swigluKernel(ctx: GpuContext, x: GpuOperand): GpuBuffer {
  throw new Error('swiglu: not implemented yet');
}
