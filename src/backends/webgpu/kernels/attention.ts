import type { AttentionOptions } from '../../backend.js';
import type { GpuBuffer, GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';

export function attentionKernel(ctx: GpuContext, q: GpuOperand, k: GpuOperand, v: GpuOperand, options: AttentionOptions): GpuBuffer {
  throw new Error('attention: not implemented yet');
}
