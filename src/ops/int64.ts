// Where int64 operands go: the int64 kernels (kernels/int64/) for arithmetic, comparisons, conversions and sums, and
// the int32 view of the words for data movement (the backends' read/copy/where). Every other op refuses int64 with
// a DTypeError naming it (util.ts commonBackend), never computing on it in float.
import { decodeInt64, encodeInt64, int64Number } from '../core/codecs.js';
import { int64WordView, isFloating, resultType, type DType } from '../core/dtype.js';
import { DTypeError } from '../core/errors.js';
import { broadcastShapes, broadcastView, normalizeDim, numel, type Shape } from '../core/shape.js';
import { Tensor, type TensorOrScalar } from '../core/tensor.js';
import { runKernel } from '../kernels/registry.js';
import type { Int64MapOp, Int64RowsOp } from '../kernels/int64/index.js';
import { COMPARISON_OPS, type Backend, type BinaryOp, type ComparisonOp, type Operand } from '../runtime/backend.js';
import { commonBackend, INT64_SUPPORTED, wrap } from './util.js';

const INT64_BINARY: ReadonlySet<string> = new Set<string>([
  'add',
  'sub',
  'mul',
  'maximum',
  'minimum',
  'floor_divide',
  'remainder',
  'fmod',
  'pow',
  ...COMPARISON_OPS,
]);

export function refuseInt64(op: string, t: { describe(): string }): never {
  throw new DTypeError(`${op} does not support int64 (tensor ${t.describe()}); ${INT64_SUPPORTED}`);
}

/** t converted to or from int64 (contiguous; `index`: int64 -> int32 for an index, INT32_MIN where it does not fit). */
export function castInt64(t: Tensor, to: DType, index = false): Tensor {
  const backend = commonBackend('to', t);
  const out = index ? 'int32' : to;
  return wrap(backend, runKernel('int64Cast', backend, { x: t.operand(), to: out, index }), out, t.shape);
}

/** The int32 words of int64 t (low, high) as a view with a trailing dim of 2, sharing t's storage. */
export function int64Words(t: Tensor): Tensor {
  return new Tensor(t.storage, int64WordView(t.layout), 'int32');
}

/** A 0-d int64 tensor holding a JS integer (a RangeError past 2^53, as tensor() gives). */
export function int64Scalar(backend: Backend, value: number): Tensor {
  return wrap(backend, backend.upload('int64', encodeInt64([value])), 'int64', []);
}

/** An index tensor as int32: int64 narrowed so an out-of-range value reaches the index kernels' range check. */
export function indexInt32(index: Tensor): Tensor | undefined {
  return index.dtype === 'int64' ? castInt64(index, 'int32', true) : undefined;
}

function operandOf(t: Tensor, shape: Shape): Operand<unknown> {
  const own = t.operand();
  return { handle: own.handle, dtype: own.dtype, view: broadcastView(t.layout, shape) };
}

/**
 * A binary op with an int64 tensor operand. The result type follows torch (float beats int64; an int64 0-d tensor or
 * a number does not widen an int32 tensor); an int64 result runs on the int64 kernels, anything else casts the int64
 * operands to it and takes the ordinary path (`next`).
 */
export function int64Binary(op: BinaryOp, x: TensorOrScalar, y: TensorOrScalar, next: (x: TensorOrScalar, y: TensorOrScalar) => Tensor): Tensor {
  const tensors = [x, y].filter((t): t is Tensor => typeof t !== 'number');
  const backend = commonBackend(op, ...tensors);
  let common = resultType(x, y);
  if (op === 'div' && !isFloating(common)) common = 'float32';
  const temps: Tensor[] = [];
  const keep = (t: Tensor) => (temps.push(t), t);
  try {
    if (common !== 'int64') {
      const side = (t: TensorOrScalar) => (typeof t === 'number' || t.dtype !== 'int64' ? t : keep(castInt64(t, common)));
      return next(side(x), side(y));
    }
    if (!INT64_BINARY.has(op)) refuseInt64(op, tensors.find((t) => t.dtype === 'int64')!);
    // A number side goes to the kernel as its value (no upload: a compiled step may not create tensors from host data).
    let scalar: { side: 'a' | 'b'; value: bigint } | undefined;
    const side = (t: TensorOrScalar, which: 'a' | 'b'): Tensor | undefined => {
      if (typeof t === 'number') {
        if (!Number.isInteger(t)) throw new DTypeError(`${op}: ${t} is not an integer for an int64 result`);
        if (!Number.isSafeInteger(t)) throw new RangeError(`${op}: ${t} is not a safe integer (|x| <= 2^53 - 1); pass an int64 tensor`);
        scalar = { side: which, value: BigInt(t) };
        return undefined;
      }
      return t.dtype === 'int64' ? t : keep(castInt64(t, 'int64'));
    };
    const ta = side(x, 'a');
    const tb = side(y, 'b');
    const a = (ta ?? tb)!;
    const b = (tb ?? ta)!;
    const shape = broadcastShapes(a.shape, b.shape);
    const outDtype: DType = (COMPARISON_OPS as readonly string[]).includes(op) ? 'bool' : 'int64';
    const handle = runKernel('int64Binary', backend, {
      op: op as Int64MapOp | ComparisonOp,
      a: operandOf(a, shape),
      b: operandOf(b, shape),
      shape,
      ...(scalar ? { scalar } : {}),
    });
    return wrap(backend, handle, outDtype, shape);
  } finally {
    for (const t of temps) t.dispose();
  }
}

/** neg / abs of int64 (wrapping: -(-2^63) is -2^63, as torch); every other unary op refuses int64. */
export function int64Unary(op: string, x: Tensor): Tensor {
  if (op !== 'neg' && op !== 'abs') refuseInt64(op, x);
  const backend = x.storage.backend;
  const a = x.operand();
  return wrap(backend, runKernel('int64Binary', backend, { op, a, b: a, shape: x.shape }), 'int64', x.shape);
}

/** where(cond, a, b) with an int64 result: both sides made int64 tensors, selected as words by the backend. */
export function int64Where(cond: Tensor, a: TensorOrScalar, b: TensorOrScalar): Tensor {
  const backend = commonBackend('where', ...[cond, a, b].filter((t): t is Tensor => typeof t !== 'number'));
  const temps: Tensor[] = [];
  const side = (t: TensorOrScalar): Tensor => {
    if (typeof t === 'number') return (temps.push(int64Scalar(backend, t)), temps[temps.length - 1]);
    return t.dtype === 'int64' ? t : (temps.push(castInt64(t, 'int64')), temps[temps.length - 1]);
  };
  try {
    const ta = side(a);
    const tb = side(b);
    const shape = broadcastShapes(broadcastShapes(cond.shape, ta.shape), tb.shape);
    return wrap(backend, backend.where(operandOf(cond, shape), operandOf(ta, shape), operandOf(tb, shape), shape, 'int64'), 'int64', shape);
  } finally {
    for (const t of temps) t.dispose();
  }
}

/** x with dim d moved last (a view), and the permutation that puts it back. */
function dimLast(x: Tensor, d: number): { moved: Tensor; back: number[] } {
  const order = [...x.shape.keys()].filter((i) => i !== d).concat(d);
  const back = order.map((_, i) => order.indexOf(i));
  return { moved: x.permute(order), back };
}

/** op of int64 x over dim d (prod, max, min: int64, wrapping as torch; argmax / argmin: the first index, int64). */
export function int64ReduceDim(x: Tensor, d: number, op: Exclude<Int64RowsOp, 'scan'>): Tensor {
  const backend = commonBackend(op, x);
  const { moved } = dimLast(x, d);
  try {
    const len = x.shape[d];
    const rows = numel(x.shape) === 0 ? numel(x.shape.filter((_, i) => i !== d)) : numel(x.shape) / len;
    const shape = x.shape.filter((_, i) => i !== d);
    return wrap(backend, runKernel('int64Rows', backend, { x: moved.operand(), rows, len, op }), 'int64', shape);
  } finally {
    moved.dispose();
  }
}

/** Running sums of int64 x along dim (int64, wrapping as torch). */
export function int64Cumsum(x: Tensor, dim: number): Tensor {
  const backend = commonBackend('cumsum', x);
  if (x.ndim === 0) {
    normalizeDim(dim, 1);
    return x.clone();
  }
  const d = normalizeDim(dim, x.ndim);
  const { moved, back } = dimLast(x, d);
  try {
    const len = x.shape[d];
    const rows = len === 0 ? 0 : numel(x.shape) / len;
    const scanned = wrap(backend, runKernel('int64Rows', backend, { x: moved.operand(), rows, len, op: 'scan' }), 'int64', moved.shape);
    const out = scanned.permute(back);
    scanned.dispose();
    return out;
  } finally {
    moved.dispose();
  }
}

/** The values of an int64 (or any integer or bool) tensor as a BigInt64Array (torch's .numpy() of an int64 tensor). */
export async function toBigInt64Array(t: Tensor): Promise<BigInt64Array> {
  if (isFloating(t.dtype)) throw new DTypeError(`toBigInt64Array: ${t.describe()} is not an integer tensor; cast it with .to('int64') first`);
  if (t.dtype !== 'int64') {
    const wide = castInt64(t, 'int64');
    try {
      return await toBigInt64Array(wide);
    } finally {
      wide.dispose();
    }
  }
  const words = (await commonBackend('toArray', t).read(t.operand())) as Int32Array;
  return decodeInt64(words);
}

/** int64 values as JS numbers (tolist/item): a RangeError for one that is not a safe integer. */
export async function int64Numbers(t: Tensor): Promise<number[]> {
  const words = (await commonBackend('toArray', t).read(t.operand())) as Int32Array;
  const out = new Array<number>(words.length >> 1);
  for (let i = 0; i < out.length; i++) out[i] = int64Number(words[2 * i], words[2 * i + 1]);
  return out;
}
