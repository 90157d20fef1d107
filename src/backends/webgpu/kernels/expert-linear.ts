import type { DType } from '../../../core/dtype.js';
import type { GpuBuffer, GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';

export interface ExpertLinearKernelOptions {
  scale?: GpuBuffer;
  combine?: GpuOperand;
  outDtype: DType;
}

export function expertLinearKernel(ctx: GpuContext, x: GpuOperand, weight: GpuOperand, ids: GpuOperand, options: ExpertLinearKernelOptions): GpuBuffer {
  throw new Error('expertLinear: not implemented yet');
}
