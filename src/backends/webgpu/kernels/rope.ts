import type { AttentionOptions } from '../../backend.js';
import type { GpuBuffer, GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';

export function ropeKernel(ctx: GpuContext, x: GpuOperand, cos: GpuOperand, sin: GpuOperand, positionOffset: number): GpuBuffer {
  throw new Error('rope: not implemented yet');
}
