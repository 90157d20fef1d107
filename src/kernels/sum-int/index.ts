// sumInt: the sum of an integer (int32, uint8, bool) tensor along one dim, accumulated exactly (64-bit on the GPU,
// float64 on the CPU: exact while partial sums stay under 2^53) and returned as int32 when it fits. torch returns
// int64; tensorgpu has no int64 yet, so a sum outside int32's range raises a RangeError (at once on the CPU, at the
// next read back or synchronize() on WebGPU, through the device error flag) instead of wrapping.
import type { Operand } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { withContiguous } from '../../runtime/webgpu/kernels/nn-util.js';
import { defineOpKernels } from '../op-kernels.js';
import { sumIntReference } from './cpu.js';
import { sumIntKernel } from './webgpu.js';

export interface SumIntArgs<H> {
  readonly x: Operand<H>;
  readonly dim: number;
}

export const sumIntKernels = defineOpKernels<SumIntArgs<unknown>>({
  cpu: (_backend, args) => {
    const a = args as SumIntArgs<never>;
    return sumIntReference(a.x, a.dim);
  },
  webgpu: (backend, args) => {
    const a = args as SumIntArgs<never>;
    return withContiguous(backend, toGpuOperand(a.x), (cx) => sumIntKernel(backend, cx, a.dim));
  },
});
