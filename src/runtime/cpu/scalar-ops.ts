// Scalar definitions of every elementwise op, in float64: the reference the GPU kernels are measured against.
import { ZeroDivisionError } from '../../core/errors.js';
import type { BinaryOp, ReduceOp, UnaryOp } from '../backend.js';

/** erfc with fractional error < 1.2e-7 everywhere (Numerical Recipes' Chebyshev fit), so gelu stays accurate for x << 0. */
export function erfc(x: number): number {
  const z = Math.abs(x);
  const t = 1 / (1 + 0.5 * z);
  const r =
    t *
    Math.exp(
      -z * z -
        1.26551223 +
        t *
          (1.00002368 +
            t *
              (0.37409196 +
                t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))),
    );
  return x >= 0 ? r : 2 - r;
}

/** erf in float64: its Maclaurin series up to |x| = 3 (cancellation costs under 1e-13 there), 1 - erfc beyond. */
export function erf(x: number): number {
  if (Number.isNaN(x)) return x;
  if (Math.abs(x) >= 3) return 1 - erfc(x);
  const x2 = x * x;
  let term = x;
  let sum = x;
  for (let n = 1; n < 80; n++) {
    term *= -x2 / n;
    const add = term / (2 * n + 1);
    sum += add;
    if (Math.abs(add) < 1e-17 * Math.abs(sum)) break;
  }
  return (2 / Math.sqrt(Math.PI)) * sum;
}

/** Round half to even (torch.round, numpy.round): JS's Math.round rounds halves up. */
export function roundHalfEven(x: number): number {
  if (!Number.isFinite(x)) return x;
  const f = Math.floor(x);
  const d = x - f;
  const r = d > 0.5 || (d === 0.5 && f % 2 !== 0) ? f + 1 : f;
  return r === 0 ? (x < 0 || Object.is(x, -0) ? -0 : 0) : r;
}

/** C's fmod (JS's % is exactly that on doubles). */
export const fmod = (a: number, b: number) => a % b;

/** torch.remainder on floats: fmod moved by b when the signs differ (ATen's formula, so fmod's exactness is kept). */
export function remainder(a: number, b: number): number {
  let m = a % b;
  if (m !== 0 && b < 0 !== m < 0) m += b;
  return m;
}

/** torch.floor_divide on floats: ATen's div_floor_floating step by step. */
export function floorDivide(a: number, b: number): number {
  if (b === 0) return a / b;
  const m = a % b;
  let d = (a - m) / b;
  if (m !== 0 && b < 0 !== m < 0) d -= 1;
  if (d === 0) return Object.is(a / b, -0) || a / b < 0 ? -0 : 0;
  let f = Math.floor(d);
  if (d - f > 0.5) f += 1;
  return f;
}

export const UNARY_F64: Readonly<Record<UnaryOp, (x: number) => number>> = {
  neg: (x) => -x,
  abs: Math.abs,
  exp: Math.exp,
  log: Math.log,
  sqrt: Math.sqrt,
  rsqrt: (x) => 1 / Math.sqrt(x),
  silu: (x) => x / (1 + Math.exp(-x)),
  gelu: (x) => 0.5 * x * erfc(-x / Math.SQRT2),
  gelu_tanh: (x) => 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x))),
  tanh: Math.tanh,
  sigmoid: (x) => 1 / (1 + Math.exp(-x)),
  relu: (x) => (Number.isNaN(x) ? x : Math.max(x, 0)),
  sin: Math.sin,
  cos: Math.cos,
  erf,
  floor: Math.floor,
  ceil: Math.ceil,
  round: roundHalfEven,
  // torch.sign: 0 for NaN and for both zeros.
  sign: (x) => (x > 0 ? 1 : x < 0 ? -1 : 0),
  reciprocal: (x) => 1 / x,
};

/** Integer versions with int32 wrap-around, as the GPU computes them. */
export const UNARY_I32: Partial<Record<UnaryOp, (x: number) => number>> = {
  neg: (x) => -x | 0,
  abs: (x) => Math.abs(x) | 0,
  relu: (x) => Math.max(x, 0),
  floor: (x) => x,
  ceil: (x) => x,
  round: (x) => x,
  sign: Math.sign,
};

// maximum/minimum propagate NaN like torch.maximum.
const nanMax = (a: number, b: number) => (Number.isNaN(a) || Number.isNaN(b) ? NaN : Math.max(a, b));
const nanMin = (a: number, b: number) => (Number.isNaN(a) || Number.isNaN(b) ? NaN : Math.min(a, b));

const isOddInteger = (y: number) => Number.isInteger(y) && Math.abs(y % 2) === 1;

/**
 * C99 / IEEE pow, as PyTorch computes it on every backend. JS's Math.pow differs at two points: 1 ** NaN and
 * (-1) ** +-Inf are NaN there, 1 in C.
 */
export function powIeee(x: number, y: number): number {
  if (y === 0 || x === 1) return 1;
  if (x === -1 && Math.abs(y) === Infinity) return 1;
  return Math.pow(x, y);
}

/** Integer pow with int32 wrap-around; a negative exponent gives 0 unless the base is 1 or -1 (PyTorch's rule). */
export function powInt32(x: number, y: number): number {
  if (y < 0) return x === 1 ? 1 : x === -1 ? (isOddInteger(y) ? -1 : 1) : 0;
  let r = 1;
  let base = x | 0;
  for (let e = y >>> 0; e > 0; e >>>= 1) {
    if (e & 1) r = Math.imul(r, base);
    base = Math.imul(base, base);
  }
  return r;
}

const sigmoid = (x: number) => 1 / (1 + Math.exp(-x));
const GELU_TANH_K = Math.sqrt(2 / Math.PI);

export const BINARY_F64: Readonly<Record<BinaryOp, (a: number, b: number) => number>> = {
  // Derivative maps (x, g) -> g * f'(x) of the backward rules.
  silu_grad: (x, g) => g * sigmoid(x) * (1 + x * (1 - sigmoid(x))),
  gelu_grad: (x, g) => g * (0.5 * erfc(-x / Math.SQRT2) + (x * Math.exp(-0.5 * x * x)) / Math.sqrt(2 * Math.PI)),
  gelu_tanh_grad: (x, g) => {
    const t = Math.tanh(GELU_TANH_K * (x + 0.044715 * x * x * x));
    return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * GELU_TANH_K * (1 + 3 * 0.044715 * x * x));
  },
  add: (a, b) => a + b,
  sub: (a, b) => a - b,
  mul: (a, b) => a * b,
  div: (a, b) => a / b,
  pow: powIeee,
  maximum: nanMax,
  minimum: nanMin,
  eq: (a, b) => +(a === b),
  ne: (a, b) => +(a !== b),
  lt: (a, b) => +(a < b),
  le: (a, b) => +(a <= b),
  gt: (a, b) => +(a > b),
  ge: (a, b) => +(a >= b),
  remainder,
  fmod,
  floor_divide: floorDivide,
};

/** Throws torch's ZeroDivisionError for an integer division op (an expression, for the ternaries that divide). */
export const zeroDivisor = (op: string): never => {
  throw new ZeroDivisionError(op);
};

export const BINARY_I32: Readonly<Record<BinaryOp, (a: number, b: number) => number>> = {
  ...BINARY_F64,
  add: (a, b) => (a + b) | 0,
  sub: (a, b) => (a - b) | 0,
  mul: (a, b) => Math.imul(a, b),
  div: (a, b) => a / b, // true division: callers compute int division in float
  pow: powInt32,
  // A zero divisor raises, as torch's CPU does (the WebGPU kernels report it to the device error flag).
  remainder: (a, b) => (b === 0 ? zeroDivisor('remainder') : remainder(a, b) | 0),
  fmod: (a, b) => (b === 0 ? zeroDivisor('fmod') : (a % b) | 0),
  floor_divide: (a, b) => (b === 0 ? zeroDivisor('floor_divide') : Math.floor(a / b) | 0),
};

export type Reducer = { init: number; step: (acc: number, x: number) => number };

export const REDUCE_F64: Readonly<Record<Exclude<ReduceOp, 'argmax' | 'argmin'>, Reducer>> = {
  sum: { init: 0, step: (a, x) => a + x },
  mean: { init: 0, step: (a, x) => a + x },
  max: { init: -Infinity, step: nanMax },
  min: { init: Infinity, step: nanMin },
  prod: { init: 1, step: (a, x) => a * x },
};
