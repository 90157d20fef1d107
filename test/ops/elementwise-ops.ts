// Tables of the elementwise ops shared by the elementwise test files: how to call each op, which inputs exercise it,
// and which dtype it returns.
import * as tg from '../../src/index.js';
import type { DType, Tensor } from '../../src/index.js';
import type { Distribution } from '../helpers/compare.js';

export type UnaryName = 'neg' | 'abs' | 'relu' | 'exp' | 'log' | 'sqrt' | 'rsqrt' | 'silu' | 'gelu' | 'gelu_tanh' | 'tanh' | 'sigmoid';

export interface UnarySpec {
  fn: (t: Tensor) => Tensor;
  /** Input values that exercise the op (log/sqrt/rsqrt: their positive domain). */
  dist: Distribution;
  scale: number;
  kind: 'simple' | 'transcendental';
  /** neg/abs/relu keep integer dtypes; the rest return float32 for integer inputs. */
  keepsInt: boolean;
}

export const UNARY: Record<UnaryName, UnarySpec> = {
  neg: { fn: (t) => t.neg(), dist: 'normal', scale: 3, kind: 'simple', keepsInt: true },
  abs: { fn: (t) => t.abs(), dist: 'normal', scale: 3, kind: 'simple', keepsInt: true },
  relu: { fn: (t) => t.relu(), dist: 'normal', scale: 3, kind: 'simple', keepsInt: true },
  exp: { fn: (t) => t.exp(), dist: 'normal', scale: 4, kind: 'transcendental', keepsInt: false },
  log: { fn: (t) => t.log(), dist: 'positive', scale: 10, kind: 'transcendental', keepsInt: false },
  sqrt: { fn: (t) => t.sqrt(), dist: 'positive', scale: 10, kind: 'transcendental', keepsInt: false },
  rsqrt: { fn: (t) => t.rsqrt(), dist: 'positive', scale: 10, kind: 'transcendental', keepsInt: false },
  silu: { fn: (t) => t.silu(), dist: 'normal', scale: 4, kind: 'transcendental', keepsInt: false },
  gelu: { fn: (t) => t.gelu({ approximate: 'none' }), dist: 'normal', scale: 4, kind: 'transcendental', keepsInt: false },
  gelu_tanh: { fn: (t) => t.gelu({ approximate: 'tanh' }), dist: 'normal', scale: 4, kind: 'transcendental', keepsInt: false },
  tanh: { fn: (t) => t.tanh(), dist: 'normal', scale: 2, kind: 'transcendental', keepsInt: false },
  sigmoid: { fn: (t) => t.sigmoid(), dist: 'normal', scale: 4, kind: 'transcendental', keepsInt: false },
};

export type BinaryName = 'add' | 'sub' | 'mul' | 'div' | 'maximum' | 'minimum' | 'eq' | 'ne' | 'lt' | 'le' | 'gt' | 'ge';
export const ARITHMETIC: BinaryName[] = ['add', 'sub', 'mul', 'div', 'maximum', 'minimum'];
export const COMPARISON: BinaryName[] = ['eq', 'ne', 'lt', 'le', 'gt', 'ge'];
export const BINARY: BinaryName[] = [...ARITHMETIC, ...COMPARISON];

export function binaryFn(op: BinaryName): (a: Tensor | number, b: Tensor | number) => Tensor {
  return tg[op] as (a: Tensor | number, b: Tensor | number) => Tensor;
}

/** The dtype a binary op returns for two tensors (comparisons: bool; integer division: float32). */
export function binaryOutDtype(op: BinaryName, dtype: DType): DType {
  if (COMPARISON.includes(op)) return 'bool';
  if (op === 'div' && (dtype === 'int32' || dtype === 'uint8')) return 'float32';
  return dtype;
}
