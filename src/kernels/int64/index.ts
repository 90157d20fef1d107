// int64's kernels: elementwise arithmetic and comparisons, conversions from and to the other dtypes, and reductions
// (running sums, products, extremes and their indices) along rows; int64 sums run on sumInt (kernels/sum-int). int64
// lives in two 32-bit words an element (lo, hi); the WebGPU kernels compute with 32-bit integer operations only
// (int64-math.wgsl), the CPU ones with BigInt, both wrapping modulo 2^64 as torch. ops/int64.ts routes int64 operands
// here; every other op refuses int64 with a DTypeError naming it.
import type { ComparisonOp, Operand } from '../../runtime/backend.js';
import type { DType } from '../../core/dtype.js';
import type { Shape } from '../../core/shape.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineOpKernels } from '../op-kernels.js';
import { int64BinaryReference, int64CastReference, int64RowsReference, type Int64MapOp, type Int64RowsOp } from './cpu.js';
import { int64BinaryKernel, int64CastKernel, int64RowsKernel } from './webgpu.js';

export type { Int64MapOp, Int64RowsOp } from './cpu.js';

/** op over a and b (int64 views already broadcast to shape; a unary op passes b = a): int64, or bool to compare. */
export interface Int64BinaryArgs<H> {
  readonly op: Int64MapOp | ComparisonOp;
  readonly a: Operand<H>;
  readonly b: Operand<H>;
  readonly shape: Shape;
  /** One side as a number (its operand is bound, not read): a JS number needs no upload, so a compiled step keeps it. */
  readonly scalar?: { readonly side: 'a' | 'b'; readonly value: bigint };
}

/** x (int64, or any dtype when to is int64) converted to `to`; `index`: int64 -> int32, INT32_MIN when out of range. */
export interface Int64CastArgs<H> {
  readonly x: Operand<H>;
  readonly to: DType;
  readonly index: boolean;
}

/**
 * op along the rows of int64 x viewed as [rows, len] (x's view must be that contiguous shape or any view of it):
 * running sums, products (wrapping), max / min, or the first index of the extreme as int64.
 */
export interface Int64RowsArgs<H> {
  readonly x: Operand<H>;
  readonly rows: number;
  readonly len: number;
  readonly op: Int64RowsOp;
}

export const int64BinaryKernels = defineOpKernels<Int64BinaryArgs<unknown>>({
  cpu: (_backend, args) => {
    const a = args as Int64BinaryArgs<never>;
    return int64BinaryReference(a.op, a.a, a.b, a.shape, a.scalar);
  },
  webgpu: (backend, args) => {
    const a = args as Int64BinaryArgs<never>;
    return int64BinaryKernel(backend, a.op, toGpuOperand(a.a), toGpuOperand(a.b), a.shape, a.scalar?.side, a.scalar?.value);
  },
});

export const int64CastKernels = defineOpKernels<Int64CastArgs<unknown>>({
  cpu: (_backend, args) => {
    const a = args as Int64CastArgs<never>;
    return int64CastReference(a.x, a.to, a.index);
  },
  webgpu: (backend, args) => {
    const a = args as Int64CastArgs<never>;
    return int64CastKernel(backend, toGpuOperand(a.x), a.to, a.index);
  },
});

export const int64RowsKernels = defineOpKernels<Int64RowsArgs<unknown>>({
  cpu: (_backend, args) => {
    const a = args as Int64RowsArgs<never>;
    return int64RowsReference(a.x, a.rows, a.len, a.op);
  },
  webgpu: (backend, args) => {
    const a = args as Int64RowsArgs<never>;
    return int64RowsKernel(backend, toGpuOperand(a.x), a.rows, a.len, a.op);
  },
});
