// Shared by the reduction test files: the ops, how to call them, and how far f32 accumulation may drift.
import { tolerance, type Tolerance } from '../helpers/compare.js';
import type { DType, Tensor } from '../../src/index.js';

export type ReduceName = 'sum' | 'mean' | 'max' | 'min' | 'argmax' | 'argmin';
export const REDUCE: ReduceName[] = ['sum', 'mean', 'max', 'min', 'argmax', 'argmin'];

export function reduceFn(op: ReduceName, dim?: number, keepdim = false): (t: Tensor) => Tensor {
  return (t) => t[op](dim, { keepdim });
}

/**
 * Sums run in f32 on the GPU (strided partial sums, then a tree) and in f64 on the CPU: allow the f32 rounding of a
 * row of `len` terms of magnitude ~`scale`, then the output dtype's own rounding. Max/min/arg are exact.
 */
export function reduceTol(op: ReduceName, dtype: DType, len: number, scale = 1): Tolerance {
  if (op === 'argmax' || op === 'argmin' || op === 'max' || op === 'min') return { atol: 0, rtol: 0 };
  const out = dtype === 'float16' || dtype === 'bfloat16' ? tolerance(dtype, 'accumulate') : tolerance('float32', 'accumulate');
  if (dtype === 'int32' || dtype === 'uint8' || dtype === 'bool') return { atol: 0, rtol: 0 };
  const rowErr = 2e-7 * Math.sqrt(len) * scale * (op === 'mean' ? 1 / len : 1) * 8;
  return { atol: out.atol + rowErr, rtol: out.rtol };
}
