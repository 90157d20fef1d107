import {
  COMPARISON_OPS,
  GRAD_OPS,
  type GradOp,
  type Operand,
  type ScalarOperand,
  type ArithmeticOp,
  type BinaryOp,
  type ComparisonOp,
  type DivisionOp,
  type UnaryOp,
} from '../runtime/backend.js';
import { castIsExact, isFloating, isFp8, promoteTypes, resultType, type DType } from '../core/dtype.js';
import { castCode, decodeOne } from '../core/codecs.js';
import { cast } from './convert.js';
import { DTypeError, ZeroDivisionError } from '../core/errors.js';
import { broadcastShapes, broadcastView, sameShape, type Shape, type View } from '../core/shape.js';
import type { Tensor, TensorOrScalar } from '../core/tensor.js';
import type { Backend } from '../runtime/backend.js';
import { commonBackend, wrap } from './util.js';
import { differentiable, type SaveSpec } from '../autograd/function.js';
import { isGradEnabled } from '../autograd/grad-mode.js';
import { binaryRule, sumTo, unaryRule } from './grad-rules.js';
import { int64Binary, int64Unary, int64Where } from './int64.js';

function unary(op: UnaryOp, x: Tensor, floatOnly: boolean): Tensor {
  if (x.dtype === 'int64') return unaryOfInt64(op, x, floatOnly);
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
 * A unary op of an int64 tensor, as torch: float functions (exp, sin, sqrt, ...) of the value converted to float32
 * (torch's default float dtype); floor / ceil / round keep the integers, relu is max(x, 0) and sign (x > 0) - (x < 0),
 * all int64; neg and abs run the int64 kernels.
 */
function unaryOfInt64(op: UnaryOp, x: Tensor, floatOnly: boolean): Tensor {
  const temps: Tensor[] = [];
  const temp = (t: Tensor) => (temps.push(t), t);
  try {
    if (floatOnly) return unary(op, temp(x.to('float32')), true);
    if (op === 'floor' || op === 'ceil' || op === 'round') return add(x, 0);
    if (op === 'relu') return maximum(x, 0);
    if (op === 'sign') return sub(temp(temp(gt(x, 0)).to('int64')), temp(temp(lt(x, 0)).to('int64')));
    return int64Unary(op, x);
  } finally {
    for (const t of temps) t.dispose();
  }
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
  sin: { inputs: [0] },
  cos: { inputs: [0] },
  erf: { inputs: [0] },
  floor: {},
  ceil: {},
  round: {},
  sign: {},
  reciprocal: { out: true },
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
// The math ops of ops/math.ts (torch.sin, ...): floor/ceil/round/sign keep an integer dtype, as torch does.
export const sin = (x: Tensor) => unary('sin', x, true);
export const cos = (x: Tensor) => unary('cos', x, true);
export const erf = (x: Tensor) => unary('erf', x, true);
export const floor = (x: Tensor) => unary('floor', x, false);
export const ceil = (x: Tensor) => unary('ceil', x, false);
export const round = (x: Tensor) => unary('round', x, false);
export const sign = (x: Tensor) => unary('sign', x, false);
export const reciprocal = (x: Tensor) => unary('reciprocal', x, true);

/**
 * A JS number operand in the op's common dtype, as a uniform. add/sub/mul/div with a 16-bit float result read the
 * number at float32 (torch's "original scalar value" for reduced floats); every other op rounds it to the common
 * dtype first, as torch casts a wrapped number to it (gt(float16, 0.1) compares with float16(0.1)).
 */
function scalarOperand(op: BinaryOp, value: number, common: DType): ScalarOperand {
  if (!isFloating(common)) return { scalar: Number.isInteger(value) ? value : castCode(value, common), dtype: 'int32' };
  const rounded = common === 'float32' || OPMATH_SCALAR_OPS.has(op) ? value : decodeOne(common, castCode(value, common));
  return { scalar: rounded, dtype: 'float32' };
}

/** The ops whose CPU kernels in torch read a 0-d or number operand at float32 beside a float16/bfloat16 tensor. */
const OPMATH_SCALAR_OPS: ReadonlySet<string> = new Set(['add', 'sub', 'mul', 'div']);
const COMPARISONS: ReadonlySet<string> = new Set(COMPARISON_OPS);
/** Ops that never record: comparisons (no gradient) and the derivative maps of backward rules. */
const UNRECORDED: ReadonlySet<string> = new Set<string>([...COMPARISON_OPS, ...GRAD_OPS]);

/** An operand as error messages name it (a JS number by its value). */
const describeOperand = (x: TensorOrScalar) => (typeof x === 'number' ? `${x}` : x.describe());

/**
 * The dtype both operands are converted to before the op (torch.result_type; div of integers: float32). Comparisons
 * return bool but compare in this dtype.
 */
function commonDtype(op: BinaryOp, a: TensorOrScalar, b: TensorOrScalar): DType {
  // FP8 compares with itself or a number (rounded to it), as torch's eq/lt do, and with a wider float tensor in that
  // float (every FP8 value is exact there); it takes part in no arithmetic.
  const fp8 = [a, b].find((t): t is Tensor => typeof t !== 'number' && isFp8(t.dtype));
  if (fp8 && COMPARISONS.has(op)) {
    const other = fp8 === a ? b : a;
    if (typeof other === 'number' || other.dtype === fp8.dtype) return fp8.dtype;
    if (isFloating(other.dtype) && !isFp8(other.dtype)) return other.dtype;
  }
  for (const t of [a, b]) {
    if (typeof t !== 'number' && isFp8(t.dtype))
      throw new DTypeError(`${op} does not take ${t.dtype} (tensor ${t.describe()}): FP8 is a storage format; cast with .to('float32') first`);
  }
  let dtype = resultType(a, b);
  if (op === 'div' && !isFloating(dtype)) dtype = 'float32';
  if (dtype === 'bool' && !COMPARISONS.has(op) && !BOOL_OPS.has(op))
    throw new DTypeError(`${op} does not take two bool operands (${describeOperand(a)}, ${describeOperand(b)}); cast to int32 first`);
  return dtype;
}

/** Ops defined on two bool operands with a bool result (torch: mul is logical and; add, maximum logical or). */
const BOOL_OPS: ReadonlySet<string> = new Set(['mul', 'maximum', 'minimum', 'add']);

/**
 * A tensor operand converted to the common dtype where the kernel's own conversion would differ from torch's: an
 * int32 operand beside a float is rounded to that float first (int32 2049 - float16 2048 is 0, as in torch), and a
 * wider float 0-d operand of an op without torch's float32 scalar path is rounded to the narrower result.
 * Undefined when the tensor can be read as it is.
 */
function convertedOperand(op: BinaryOp, t: Tensor, common: DType): Tensor | undefined {
  if (t.dtype === common || castIsExact(t.dtype, common)) return undefined;
  if (t.ndim === 0 && OPMATH_SCALAR_OPS.has(op) && isFloating(t.dtype) && isFloating(common)) return undefined;
  return cast(t, common);
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
  if ((typeof x !== 'number' && x.dtype === 'int64') || (typeof y !== 'number' && y.dtype === 'int64'))
    return int64Binary(op, x, y, (a, b) => binary(op, a, b));
  const backend = backendOf(op, typeof x === 'number' ? undefined : x, typeof y === 'number' ? undefined : y);
  const common = UNRECORDED.has(op) && !COMPARISONS.has(op) ? gradMapDtype(x as Tensor, y as Tensor) : commonDtype(op, x, y);
  const outDtype: DType = COMPARISONS.has(op) ? 'bool' : common;
  // Operands converted to the common dtype first where torch's conversion differs from the kernel's.
  const cx = typeof x === 'number' ? undefined : convertedOperand(op, x, common);
  const cy = typeof y === 'number' ? undefined : convertedOperand(op, y, common);
  const tx = typeof x === 'number' ? undefined : (cx ?? x);
  const ty = typeof y === 'number' ? undefined : (cy ?? y);
  const sa = tx ? undefined : scalarOperand(op, x as number, common);
  const sb = ty ? undefined : scalarOperand(op, y as number, common);
  // A number broadcasts to the tensor's shape; two tensors of one shape (the usual case) keep theirs.
  const shape: Shape = !tx ? ty!.shape : !ty ? tx.shape : binaryShape(tx, ty);
  const opA = sa ?? broadcastOperand(tx!, shape);
  const opB = sb ?? broadcastOperand(ty!, shape);
  // Without grad an op is its kernel alone: no closures, no tape (differentiable would make both only to drop them).
  if (UNRECORDED.has(op) || !isGradEnabled() || !(tx?.requiresGrad || ty?.requiresGrad)) {
    const out = wrap(backend, backend.binary(op, opA, opB, shape, outDtype), outDtype, shape);
    cx?.dispose();
    cy?.dispose();
    return out;
  }
  return recordedBinary(op, tx ?? x, ty ?? y, backend, opA, opB, shape, outDtype);
}

/** The derivative maps take (x, g) of one float dtype, or x wider than g (the gradient's dtype wins as before). */
function gradMapDtype(x: Tensor, g: Tensor): DType {
  return x.dtype === g.dtype ? x.dtype : promoteTypes(x.dtype, g.dtype);
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
    BINARY_SAVES[op as ArithmeticOp] ?? DIVISION_SAVES[op as DivisionOp],
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

/** remainder and fmod read both inputs (d/dy = -floor(x / y) or -trunc(x / y)); floor_divide's gradient is zero. */
const DIVISION_SAVES: Record<DivisionOp, SaveSpec> = { remainder: { inputs: [0, 1] }, fmod: { inputs: [0, 1] }, floor_divide: {} };

/**
 * The elementwise derivative maps backward rules use (silu_grad(x, g) = g * silu'(x), ...): one kernel each,
 * instead of a chain of ops. Not differentiable themselves.
 */
export function gradMap(op: GradOp, x: Tensor, g: Tensor): Tensor {
  return binary(op, x, g);
}

const arithmetic = (op: ArithmeticOp) => (a: TensorOrScalar, b: TensorOrScalar) => binary(op, a, b);
const comparison = (op: ComparisonOp) => (a: TensorOrScalar, b: TensorOrScalar) => binary(op, a, b);

/** add / sub's `alpha`: a + alpha * b (torch's alpha keyword). */
export interface AlphaOptions {
  alpha?: number;
}

/** div's `roundingMode` (torch's rounding_mode): true division by default, or the quotient truncated / floored. */
export interface DivOptions {
  roundingMode?: 'trunc' | 'floor' | null;
}

/**
 * a + alpha * b (or a - alpha * b). Integer results need an integer alpha (torch's rule); a float16/bfloat16 result
 * is computed in float32 and rounded once, as torch's kernels do in their float32 "opmath".
 */
function withAlpha(op: 'add' | 'sub', a: TensorOrScalar, b: TensorOrScalar, options: AlphaOptions | undefined): Tensor {
  const alpha = options?.alpha;
  if (alpha === undefined || alpha === 1) return binary(op, a, b);
  const common = commonDtype(op, a, b);
  if (!isFloating(common) && !Number.isInteger(alpha))
    throw new DTypeError(`${op}: for integral operands (${describeOperand(a)}, ${describeOperand(b)}) alpha must not be a fraction, got ${alpha}`);
  if (typeof b === 'number') return binary(op, a, b * alpha);
  if (common !== 'float16' && common !== 'bfloat16') {
    const scaled = binary('mul', b, alpha);
    try {
      return binary(op, a, scaled);
    } finally {
      scaled.dispose();
    }
  }
  const temps: Tensor[] = [];
  const wide = (t: TensorOrScalar) => (typeof t === 'number' || t.dtype === 'float32' ? t : (temps.push(cast(t, 'float32')), temps[temps.length - 1]));
  try {
    const scaled = binary('mul', wide(b), alpha);
    temps.push(scaled);
    const sum = binary(op, wide(a), scaled);
    temps.push(sum);
    return cast(sum, common);
  } finally {
    for (const t of temps) t.dispose();
  }
}

export const add = (a: TensorOrScalar, b: TensorOrScalar, options?: AlphaOptions) => withAlpha('add', a, b, options);
export const sub = (a: TensorOrScalar, b: TensorOrScalar, options?: AlphaOptions) => withAlpha('sub', a, b, options);
export const mul = arithmetic('mul');

/**
 * a / b (torch.div): true division (integers give float32), or with `roundingMode` 'floor' (floorDivide) or
 * 'trunc' (the quotient rounded toward zero; integers stay integers, as torch). A float16/bfloat16 'trunc' truncates
 * the quotient rounded to that dtype (torch truncates the float32 quotient first). An integer division by zero
 * raises ZeroDivisionError (see floorDivide).
 */
export function div(a: TensorOrScalar, b: TensorOrScalar, options?: DivOptions): Tensor {
  const mode = options?.roundingMode;
  if (mode === undefined || mode === null) return binary('div', a, b);
  if (mode === 'floor') return floorDivide(a, b);
  if (mode !== 'trunc') throw new DTypeError(`div: roundingMode must be 'trunc', 'floor' or null, got '${mode as string}'`);
  const common = commonDtype('sub', a, b);
  const temps: Tensor[] = [];
  const t = (x: Tensor) => (temps.push(x), x);
  try {
    if (isFloating(common)) {
      const q = t(binary('div', a, b));
      return where(t(lt(q, 0)), t(ceil(q)), t(floor(q)));
    }
    // The floor quotient q and remainder r (r has b's sign): truncation adds 1 where r != 0 and q is negative.
    const q = t(floorDivide(a, b));
    const r = t(remainder(a, b));
    return add(q, t(mul(t(ne(r, 0)), t(lt(q, 0)))));
  } finally {
    for (const x of temps) x.dispose();
  }
}
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
/**
 * An integer division op: integers stay integers, and a zero divisor raises ZeroDivisionError as torch's CPU does
 * (a number 0 at once; a tensor's zero on the CPU at once, on WebGPU at the next read back or synchronize(), through
 * the device error flag).
 */
function integerDivision(op: DivisionOp) {
  return (a: TensorOrScalar, b: TensorOrScalar): Tensor => {
    if (b === 0 && typeof a !== 'number' && !isFloating(commonDtype(op, a, b))) throw new ZeroDivisionError(op);
    return binary(op, a, b);
  };
}
/** x mod y with the divisor's sign (torch.remainder, Python's %); integers stay integers (a zero divisor raises). */
export const remainder = integerDivision('remainder');
/** x mod y with the dividend's sign (torch.fmod, C's fmod); exact for floats; an integer zero divisor raises. */
export const fmod = integerDivision('fmod');
/** floor(x / y) (torch.floor_divide, div(rounding_mode='floor')); integers stay integers (a zero divisor raises). */
export const floorDivide = integerDivision('floor_divide');
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
  if (ta && tb && ta.dtype !== tb.dtype && (isFp8(ta.dtype) || isFp8(tb.dtype)))
    throw new DTypeError(`where: ${ta.describe()} and ${tb.describe()} have no common dtype (FP8 mixes with nothing); cast first`);
  // torch.where promotes a and b as arithmetic does (0-d tensors and JS numbers by category only).
  const dtype = resultType(a, b);
  if (dtype === 'int64') return int64Where(cond, a, b);
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
