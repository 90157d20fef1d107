// scatter-targets' kernels on each backend (ops/scatter.ts validates and calls them).
import type { Operand } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineOpKernels } from '../op-kernels.js';
import { scatterTargetsReference } from './cpu.js';
import { scatterTargetsKernel } from './webgpu.js';

/**
 * The targets of torch.scatter / scatter_add: int32 [numel(index)], each index element's flat position in a
 * contiguous x of strides `xStrides` (its own coordinates with `dim` replaced by its value). index: int32 or int64,
 * any view. A value outside [0, dimSize) is checked before any multiply, so it never wraps to a valid position: the
 * CPU throws an IndexError, WebGPU reports it in the device error flag and gives -1, which indexAdd skips.
 */
export interface ScatterTargetsArgs<H> {
  readonly index: Operand<H>;
  readonly dim: number;
  readonly dimSize: number;
  readonly xStrides: readonly number[];
}

export const scatterTargetsKernels = defineOpKernels<ScatterTargetsArgs<unknown>>({
  cpu: (_backend, args) => {
    const a = args as ScatterTargetsArgs<never>;
    return scatterTargetsReference(a.index, a.dim, a.dimSize, a.xStrides);
  },
  webgpu: (backend, args) => {
    const a = args as ScatterTargetsArgs<never>;
    return scatterTargetsKernel(backend, toGpuOperand(a.index), a.dim, a.dimSize, a.xStrides);
  },
});
