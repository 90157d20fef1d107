import type { GpuBuffer, GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';

export function moeRouteKernel(ctx: GpuContext, logits: GpuOperand, topK: number, normalize: boolean): [GpuBuffer, GpuBuffer] {
  throw new Error('moeRoute: not implemented yet');
}
