// Elementwise ops as data: each is its WGSL expression over the inputs x, y, z (per compute type) and the helper
// files it calls. The map kernels (elementwise.ts) supply everything else: bindings, strided or vectorized loads,
// dtype decode/encode, the loop. A new elementwise op is one entry here plus its CPU reference in
// runtime/cpu/scalar-ops.ts (docs/kernels.md).
import { ARITHMETIC_OPS, COMPARISON_OPS, DIVISION_OPS, UNARY_OPS, type BinaryOp, type UnaryOp } from '../../backend.js';
import { deviceErrorCode } from './device-error.js';
import type { ComputeType } from './wgsl.js';

export interface MapOp {
  readonly arity: 1 | 2 | 3;
  /** The result in f32 compute (x, y, z: the inputs decoded to f32). */
  readonly f32?: string;
  /** The result in i32 compute (every dtype involved is an integer or bool). */
  readonly i32?: string;
  /** The result from raw storage codes (u32), for ops that only move codes (copy, where of one dtype). */
  readonly raw?: string;
  /** .wgsl files of helper functions the expressions call (float-math.wgsl is always there for f32). */
  readonly uses?: readonly string[];
  /**
   * The i32 expression reports a zero divisor to the device error flag (torch raises ZeroDivisionError): a kernel
   * holding it binds `err` and includes ZERO_DIVISOR_WGSL (see mapReports).
   */
  readonly i32Reports?: boolean;
}

const F32_UNARY: Record<UnaryOp, string> = {
  neg: '-x',
  abs: 'abs(x)',
  exp: 'exp_safe(x)',
  log: 'log_safe(x)',
  sqrt: 'sqrt_safe(x)',
  rsqrt: 'rsqrt_safe(x)',
  silu: 'x / (1.0 + exp_safe(-x))',
  gelu: '0.5 * x * erfc_approx(-x * 0.7071067811865476)',
  gelu_tanh: '0.5 * x * (1.0 + tanh_safe(0.7978845608028654 * (x + 0.044715 * x * x * x)))',
  tanh: 'tanh_safe(x)',
  sigmoid: '1.0 / (1.0 + exp_safe(-x))',
  relu: 'select(max(x, 0.0), x, is_nan(x))',
  sin: 'sin_ieee(x)',
  cos: 'cos_ieee(x)',
  erf: 'erf_f32(x)',
  floor: 'floor(x)',
  ceil: 'ceil(x)',
  // WGSL's round is half to even, as torch.round.
  round: 'round(x)',
  sign: 'sign_f32(x)',
  reciprocal: '1.0 / x',
};

/** Unary ops whose helpers live in math-ops.wgsl. */
const MATH_UNARY: ReadonlySet<string> = new Set(['sin', 'cos', 'erf', 'sign']);

const I32_UNARY: Partial<Record<UnaryOp, string>> = {
  neg: '-x',
  abs: 'abs(x)',
  relu: 'max(x, 0)',
  floor: 'x',
  ceil: 'x',
  round: 'x',
  sign: 'sign(x)',
};

function binaryExpr(op: BinaryOp, c: ComputeType): string {
  const one = c === 'f32' ? '1.0' : '1';
  const zero = c === 'f32' ? '0.0' : '0';
  const ordered = c === 'f32' ? '!is_nan(x) && !is_nan(y) && ' : '';
  const cmp = (cond: string) => `select(${zero}, ${one}, ${cond})`;
  switch (op) {
    case 'add':
      return 'x + y';
    case 'sub':
      return 'x - y';
    case 'mul':
      return 'x * y';
    case 'div':
      return 'x / y';
    case 'pow':
      return c === 'f32' ? 'pow_f32(x, y)' : 'pow_i32(x, y)';
    // WGSL leaves max(0, -0) to the driver (SwiftShader returns y); the CPU backend orders -0 below +0, which for
    // equal operands is the AND (maximum) or OR (minimum) of their bits.
    case 'maximum':
      return c === 'f32'
        ? 'select(select(max(x, y), f32_bits(bitcast<u32>(x) & bitcast<u32>(y)), x == y), f32_bits(0x7fc00000u), is_nan(x) || is_nan(y))'
        : 'max(x, y)';
    case 'minimum':
      return c === 'f32'
        ? 'select(select(min(x, y), f32_bits(bitcast<u32>(x) | bitcast<u32>(y)), x == y), f32_bits(0x7fc00000u), is_nan(x) || is_nan(y))'
        : 'min(x, y)';
    case 'eq':
      return cmp(`${ordered}x == y`);
    case 'ne':
      return cmp(c === 'f32' ? 'is_nan(x) || is_nan(y) || x != y' : 'x != y');
    case 'lt':
      return cmp(`${ordered}x < y`);
    case 'le':
      return cmp(`${ordered}x <= y`);
    case 'gt':
      return cmp(`${ordered}x > y`);
    case 'ge':
      return cmp(`${ordered}x >= y`);
    default:
      throw new Error(`no binary expression for ${op}`);
  }
}

const ops: Record<string, MapOp> = {
  // A copy moves codes as they are (NaN payloads included); a cast decodes and re-encodes.
  copy: { arity: 1, raw: 'x' },
  cast: { arity: 1, f32: 'x', i32: 'x' },
  // where(cond, a, b): cond is bool. Of one dtype it selects codes, so FP8 and NaN payloads pass untouched.
  where: { arity: 3, f32: 'select(z, y, x != 0.0)', i32: 'select(z, y, x != 0)', raw: 'select(z, y, x != 0u)' },
};
for (const op of UNARY_OPS) ops[op] = { arity: 1, f32: F32_UNARY[op], i32: I32_UNARY[op], uses: MATH_UNARY.has(op) ? ['math-ops.wgsl'] : undefined };
for (const op of DIVISION_OPS) {
  const i32 = `${op}_i32(x, nonzero_i32(y, ${deviceErrorCode(op)}u))`;
  ops[op] = { arity: 2, f32: `${op}_f32(x, y)`, i32, uses: ['division-ops.wgsl'], i32Reports: true };
}
for (const op of [...ARITHMETIC_OPS, ...COMPARISON_OPS]) {
  ops[op] = { arity: 2, f32: binaryExpr(op, 'f32'), i32: binaryExpr(op, 'i32'), uses: op === 'pow' ? ['pow.wgsl'] : undefined };
}

// Derivative maps of the backward rules, (x, g) -> g * f'(x); float only.
ops.silu_grad = { arity: 2, f32: 'g_silu(x, y)', uses: ['grad-maps.wgsl'] };
ops.gelu_grad = { arity: 2, f32: 'g_gelu(x, y)', uses: ['grad-maps.wgsl'] };
ops.gelu_tanh_grad = { arity: 2, f32: 'g_gelu_tanh(x, y)', uses: ['grad-maps.wgsl'] };

export const MAP_OPS: Readonly<Record<string, MapOp>> = ops;

/** Whether op's expression in compute type c reports to the device error flag (an integer division). */
export function mapReports(name: string, c: ComputeType | 'raw'): boolean {
  return c === 'i32' && MAP_OPS[name]?.i32Reports === true;
}

/** The op's expression in compute type c ('raw': storage codes); throws when the op has none for it. */
export function mapExpression(name: string, c: ComputeType | 'raw'): string {
  const op = MAP_OPS[name];
  const expr = op?.[c];
  if (!expr) throw new Error(`elementwise op ${name} has no ${c} kernel`);
  return expr;
}
