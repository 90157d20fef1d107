// reduce's kernels on each backend (ops/reduce.ts validates and calls them).
import type { DType } from '../../core/dtype.js';
import type { Operand, ReduceOp } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { withContiguous } from '../../runtime/webgpu/kernels/nn-util.js';
import { defineOpKernels } from '../op-kernels.js';
import { reduceReference } from './cpu.js';
import { reduceKernel } from './webgpu.js';

/** Reduces dim of x; the result is contiguous with that dim removed, in outDtype. */
export interface ReduceArgs<H> {
  readonly op: ReduceOp;
  readonly x: Operand<H>;
  readonly dim: number;
  readonly outDtype: DType;
}

export const reduceKernels = defineOpKernels<ReduceArgs<unknown>>({
  cpu: (_backend, args) => {
    const a = args as ReduceArgs<never>;
    return reduceReference(a.op, a.x, a.dim, a.outDtype);
  },
  webgpu: (backend, args) => {
    const a = args as ReduceArgs<never>;
    return withContiguous(backend, toGpuOperand(a.x), (cx) => reduceKernel(backend, a.op, cx, a.dim, a.outDtype));
  },
});
