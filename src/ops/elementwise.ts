import {
  COMPARISON_OPS,
  GRAD_OPS,
  type GradOp,
  type Operand,
  type ScalarOperand,
  type ArithmeticOp,
  type BinaryOp,
  type ComparisonOp,
  type UnaryOp,
} from '../runtime/backend.js';
import { DTYPE_INFO, isFloating, isFp8, promoteTypes, type DType } from '../core/dtype.js';
import { DTypeError } from '../core/errors.js';
import { broadcastShapes, broadcastView, sameShape, type Shape, type View } from '../core/shape.js';
import type { Tensor, TensorOrScalar } from '../core/tensor.js';
import type { Backend } from '../runtime/backend.js';
import { commonBackend, wrap } from './util.js';
import { differentiable, type SaveSpec } from '../autograd/function.js';
import { isGradEnabled } from '../autograd/grad-mode.js';
import { binaryRule, sumTo, unaryRule } from './grad-rules.js';

function unary(op: UnaryOp, x: Tensor, floatOnly: boolean): Tensor {
  const backend = x.storage.backend;
  if (isFp8(x.dtype)) throw new DTypeError(`${op} does not take ${x.dtype} (tensor ${x.describe()}): FP8 is a storage format; cast with .to('float32') first`);
  if (x.dtype === 'bool' && !floatOnly) throw new DTypeError(`${op} does not take bool (tensor ${x.describe()})`);
  // Like PyTorch, float functions of integer tensors return float32.
  const outDtype: DType = floatOnly && !isFloating(x.dtype) ? 'float32' : x.dtype;
  // Without grad an op is its kernel alone: no closures, no tape (differentiable would make both only to drop them).
  if (!isGradEnabled() || !x.requiresGrad) return wrap(backend, backend.unary(op, x.operand(), outDtype), outDtype, x.shape);
  return recordedUnary(op, x, backend, outDtype);
}

/**
 * The recorded form of unary(), apart so that unary() itself holds no closure: V8 allocates the variables a
 * closure captures on every call of the function that declares it, taken branch or not.
 */
function recordedUnary(op: UnaryOp, x: Tensor, backend: Backend, outDtype: DType): Tensor {
  return differentiable(
    op,
    [x],
    () => wrap(backend, backend.unary(op, x.operand(), outDtype), outDtype, x.shape),
    (g, s) => [unaryRule(op, g, s.inputs[0] as Tensor, s.out!)],
    UNARY_SAVES[op],
  );
}

/** What each unary rule reads (the output where it gives the derivative, else the input). */
const UNARY_SAVES: Record<UnaryOp, SaveSpec> = {
  neg: {},
  abs: { inputs: [0] },
  relu: { out: true },
  exp: { out: true },
  log: { inputs: [0] },
  sqrt: { out: true },
  rsqrt: { out: true },
  tanh: { out: true },
  sigmoid: { out: true },
  silu: { inputs: [0] },
  gelu: { inputs: [0] },
  gelu_tanh: { inputs: [0] },
};

export const neg = (x: Tensor) => unary('neg', x, false);
export const abs = (x: Tensor) => unary('abs', x, false);
export const relu = (x: Tensor) => unary('relu', x, false);
export const exp = (x: Tensor) => unary('exp', x, true);
export const log = (x: Tensor) => unary('log', x, true);
export const sqrt = (x: Tensor) => unary('sqrt', x, true);
export const rsqrt = (x: Tensor) => unary('rsqrt', x, true);
export const silu = (x: Tensor) => unary('silu', x, true);
export const tanh = (x: Tensor) => unary('tanh', x, true);
export const sigmoid = (x: Tensor) => unary('sigmoid', x, true);
/** Exact (erf) GELU by default, the tanh approximation with `{approximate: 'tanh'}` (torch.nn.functional.gelu). */
export const gelu = (x: Tensor, options: { approximate?: 'none' | 'tanh' } = {}) => unary(options.approximate === 'tanh' ? 'gelu_tanh' : 'gelu', x, true);

/** A JS number operand: float32 beside a float tensor or for a fraction, else int32; it travels as a uniform. */
function scalarOperand(value: number, like: Tensor): ScalarOperand {
  return { scalar: value, dtype: isFloating(like.dtype) || !Number.isInteger(value) ? 'float32' : 'int32' };
}

const CATEGORY = { bool: 0, int: 1, float: 2 } as const;
const category = (dtype: DType) => CATEGORY[DTYPE_INFO[dtype].kind];
const COMPARISONS: ReadonlySet<string> = new Set(COMPARISON_OPS);
/** Ops that never record: comparisons (no gradient) and the derivative maps of backward rules. */
const UNRECORDED: ReadonlySet<string> = new Set<string>([...COMPARISON_OPS, ...GRAD_OPS]);

/** An operand as error messages name it (a JS number by its value). */
const describeOperand = (x: Tensor | ScalarOperand, scalar: boolean) => (scalar ? `${(x as ScalarOperand).scalar}` : (x as Tensor).describe());

function resultDtype(op: BinaryOp, a: Tensor | ScalarOperand, b: Tensor | ScalarOperand, aScalar: boolean, bScalar: boolean): DType {
  if (COMPARISONS.has(op)) return 'bool';
  if (isFp8(a.dtype) || isFp8(b.dtype)) {
    const [t, scalar] = isFp8(a.dtype) ? [a, aScalar] : [b, bScalar];
    throw new DTypeError(`${op} does not take ${t.dtype} (tensor ${describeOperand(t, scalar)}): FP8 is a storage format; cast with .to('float32') first`);
  }
  // A JS number does not widen a tensor's dtype (PyTorch's wrapped-number rule), unless it is of a higher category:
  // a fraction with an integer tensor, any number with a bool tensor (bool + 1 is int32, as torch gives int64).
  let dtype =
    aScalar && category(b.dtype) >= category(a.dtype) ? b.dtype : bScalar && category(a.dtype) >= category(b.dtype) ? a.dtype : promoteTypes(a.dtype, b.dtype);
  if (op === 'div' && !isFloating(dtype)) dtype = 'float32';
  if (dtype === 'bool')
    throw new DTypeError(`${op} does not take two bool tensors (${describeOperand(a, aScalar)}, ${describeOperand(b, bScalar)}); cast to int32 first`);
  return dtype;
}

/** The one backend of an op's tensor operands (either may be absent: a JS number). */
function backendOf(op: string, a: Tensor | undefined, b: Tensor | undefined): Backend {
  if (a && b) {
    const first = a.storage.backend;
    return b.storage.backend === first ? first : commonBackend(op, a, b);
  }
  return (a ?? b)!.storage.backend;
}

/**
 * The last broadcast view made of each layout, with the shape it was made for: a bias added op after op is
 * broadcast to the same (frozen) shape array each time. Both are frozen, so an entry cannot go stale.
 */
const broadcastViews = new WeakMap<View, { readonly shape: Shape; readonly view: View }>();

/** t's operand read as `shape` (its own view when it already has that shape). */
function broadcastOperand(t: Tensor, shape: Shape): Operand<unknown> {
  const own = t.operand();
  if (sameShape(t.shape, shape)) return own;
  const layout = t.layout;
  let cached = broadcastViews.get(layout);
  if (cached === undefined || cached.shape !== shape) {
    const view = broadcastView(layout, shape);
    cached = { shape, view: Object.freeze({ shape: view.shape, strides: Object.freeze(view.strides), offset: view.offset }) };
    if (Object.isFrozen(shape) && Object.isFrozen(layout)) broadcastViews.set(layout, cached);
  }
  return { handle: own.handle, dtype: own.dtype, view: cached.view };
}

/**
 * The broadcast shape of two tensors: one of their own (frozen) shape arrays when it equals one (x + bias), which
 * the result then shares, else a new one.
 */
function binaryShape(x: Tensor, y: Tensor): Shape {
  if (sameShape(x.shape, y.shape)) return x.shape;
  const shape = broadcastShapes(x.shape, y.shape);
  return sameShape(shape, x.shape) ? x.shape : sameShape(shape, y.shape) ? y.shape : shape;
}

function binary(op: BinaryOp, x: TensorOrScalar, y: TensorOrScalar): Tensor {
  if (typeof x === 'number' && typeof y === 'number') throw new DTypeError(`${op} needs at least one tensor operand`);
  const tx = typeof x === 'number' ? undefined : x;
  const ty = typeof y === 'number' ? undefined : y;
  const sa = tx ? undefined : scalarOperand(x as number, ty!);
  const sb = ty ? undefined : scalarOperand(y as number, tx!);
  const backend = backendOf(op, tx, ty);
  const outDtype = resultDtype(op, tx ?? sa!, ty ?? sb!, sa !== undefined, sb !== undefined);
  // A number broadcasts to the tensor's shape; two tensors of one shape (the usual case) keep theirs.
  const shape: Shape = !tx ? ty!.shape : !ty ? tx.shape : binaryShape(tx, ty);
  const opA = sa ?? broadcastOperand(tx!, shape);
  const opB = sb ?? broadcastOperand(ty!, shape);
  // Without grad an op is its kernel alone: no closures, no tape (differentiable would make both only to drop them).
  if (UNRECORDED.has(op) || !isGradEnabled() || !(tx?.requiresGrad || ty?.requiresGrad))
    return wrap(backend, backend.binary(op, opA, opB, shape, outDtype), outDtype, shape);
  return recordedBinary(op, x, y, backend, opA, opB, shape, outDtype);
}

/** The recorded form of binary(), apart for the reason recordedUnary is. */
function recordedBinary(
  op: BinaryOp,
  x: TensorOrScalar,
  y: TensorOrScalar,
  backend: Backend,
  opA: Operand<unknown> | ScalarOperand,
  opB: Operand<unknown> | ScalarOperand,
  shape: Shape,
  outDtype: DType,
): Tensor {
  const forward = () => wrap(backend, backend.binary(op, opA, opB, shape, outDtype), outDtype, shape);
  return differentiable(
    op,
    [x, y],
    forward,
    (g, s) => binaryRule(op, g, s.inputs[0] ?? x, s.inputs[1] ?? y, s.out!, s.needs),
    BINARY_SAVES[op as ArithmeticOp],
  );
}

/** What each arithmetic rule reads (of an unsaved input, the rule reads only its shape). */
const BINARY_SAVES: Record<ArithmeticOp, SaveSpec> = {
  add: {},
  sub: {},
  mul: { inputs: [0, 1] },
  div: { inputs: [1], out: true },
  pow: { inputs: [0, 1], out: true },
  maximum: { inputs: [0, 1] },
  minimum: { inputs: [0, 1] },
};

/**
 * The elementwise derivative maps backward rules use (silu_grad(x, g) = g * silu'(x), ...): one kernel each,
 * instead of a chain of ops. Not differentiable themselves.
 */
export function gradMap(op: GradOp, x: Tensor, g: Tensor): Tensor {
  return binary(op, x, g);
}

const arithmetic = (op: ArithmeticOp) => (a: TensorOrScalar, b: TensorOrScalar) => binary(op, a, b);
const comparison = (op: ComparisonOp) => (a: TensorOrScalar, b: TensorOrScalar) => binary(op, a, b);

export const add = arithmetic('add');
export const sub = arithmetic('sub');
export const mul = arithmetic('mul');
export const div = arithmetic('div');
export const maximum = arithmetic('maximum');

/**
 * x ** y, elementwise with broadcasting (torch.pow): a tensor or a JS number on either side, PyTorch's promotion
 * (int ** int stays an integer, int ** 0.5 is float32), C's special cases (0 ** 0 = 1, 1 ** NaN = 1, a negative
 * base with a non-integer exponent is NaN). An integer tensor to a negative integer number is an error, as in
 * PyTorch; with an integer tensor exponent the result is 0 unless the base is 1 or -1.
 */
export function pow(x: TensorOrScalar, y: TensorOrScalar): Tensor {
  if (typeof y === 'number' && typeof x !== 'number' && !isFloating(x.dtype) && Number.isInteger(y) && y < 0) {
    throw new DTypeError(`pow: integers to negative integer powers are not allowed (${x.describe()} ** ${y}); use a float tensor`);
  }
  return binary('pow', x, y);
}
export const minimum = arithmetic('minimum');
export const eq = comparison('eq');
export const ne = comparison('ne');
export const lt = comparison('lt');
export const le = comparison('le');
export const gt = comparison('gt');
export const ge = comparison('ge');

/**
 * where(cond, a, b): a where cond is true, else b (torch.where), broadcasting all three. cond must be bool; a and b
 * are tensors or JS numbers, promoted as in arithmetic (two numbers: float32 if either is fractional, else
 * int32). When a and b share the result's dtype the kernel selects storage codes, so NaN payloads and FP8 tensors
 * pass through unchanged.
 */
export function where(cond: Tensor, a: TensorOrScalar, b: TensorOrScalar): Tensor {
  if (cond.dtype !== 'bool')
    throw new DTypeError(`where: the condition must be bool, got ${cond.describe()}; compare first (x.gt(0)) or cast with .to('bool')`);
  const sa = typeof a === 'number' ? a : undefined;
  const sb = typeof b === 'number' ? b : undefined;
  const ta = typeof a === 'number' ? undefined : a;
  const tb = typeof b === 'number' ? undefined : b;
  const backend = commonBackend('where', ...[cond, ta, tb].filter((t): t is Tensor => t !== undefined));
  let dtype: DType;
  if (ta && tb) dtype = ta.dtype === tb.dtype ? ta.dtype : promoteTypes(ta.dtype, tb.dtype);
  else if (ta || tb) {
    const t = (ta ?? tb)!;
    const n = (sa ?? sb)!;
    // A JS number does not widen a tensor's dtype unless it is of a higher category (PyTorch's wrapped numbers).
    dtype = isFloating(t.dtype) ? t.dtype : !Number.isInteger(n) ? 'float32' : t.dtype === 'bool' ? 'int32' : t.dtype;
  } else dtype = Number.isInteger(sa) && Number.isInteger(sb) ? 'int32' : 'float32';
  for (const t of [ta, tb]) {
    if (t && isFp8(t.dtype) && t.dtype !== dtype)
      throw new DTypeError(
        `where: ${t.describe()} and ${(t === ta ? tb : ta)?.describe() ?? 'a number'} have no common dtype (FP8 mixes with nothing); cast first`,
      );
  }
  const shape = broadcastShapes(broadcastShapes(cond.shape, ta?.shape ?? []), tb?.shape ?? []);
  const operand = (t: Tensor | undefined, n: number | undefined): Operand<unknown> | ScalarOperand =>
    t ? broadcastOperand(t, shape) : { scalar: n!, dtype: isFloating(dtype) || !Number.isInteger(n) ? 'float32' : 'int32' };
  const c = broadcastOperand(cond, shape);
  if (!isGradEnabled() || !(cond.requiresGrad || ta?.requiresGrad || tb?.requiresGrad))
    return wrap(backend, backend.where(c, operand(ta, sa), operand(tb, sb), shape, dtype), dtype, shape);
  const forward = () => wrap(backend, backend.where(c, operand(ta, sa), operand(tb, sb), shape, dtype), dtype, shape);
  return differentiable(
    'where',
    [cond, a, b],
    forward,
    (g, s) => {
      const kept = s.inputs[0] as Tensor;
      return [
        undefined,
        s.needs[1] ? sumTo(where(kept, g, 0), (a as Tensor).shape) : undefined,
        s.needs[2] ? sumTo(where(kept, 0, g), (b as Tensor).shape) : undefined,
      ];
    },
    { inputs: [0] },
  );
}
