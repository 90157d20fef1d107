// sumInt: the sum of an integer (int32, uint8, bool, int64) tensor along one dim, as int64 (torch sums integers into
// int64): exact, wrapping modulo 2^64 (64-bit partial sums on the GPU, BigInt on the CPU).
import type { Operand } from '../../runtime/backend.js';
import { withContiguousInt64 } from '../int64/webgpu.js';
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
    const x = toGpuOperand(a.x);
    return (x.dtype === 'int64' ? withContiguousInt64 : withContiguous)(backend, x, (cx) => sumIntKernel(backend, cx, a.dim));
  },
});
