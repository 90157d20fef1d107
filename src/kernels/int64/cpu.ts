// The int64 reference: BigInt arithmetic on the storage words (lo, hi per element), wrapping modulo 2^64 as torch's
// int64 does. Conversions to float32 round the exact integer to nearest even (not through a float64, which would
// round twice); float16/bfloat16 then round that float32, as torch's casts from int64 go through float.
import { allocStorage, castCode, type StorageArray } from '../../core/codecs.js';
import { isFloating, type DType } from '../../core/dtype.js';
import { numel, type Shape } from '../../core/shape.js';
import type { ComparisonOp, Operand } from '../../runtime/backend.js';
import { values, viewIndices } from '../../runtime/cpu/cpu-backend.js';
import { zeroDivisor } from '../../runtime/cpu/scalar-ops.js';

export type Int64MapOp = 'add' | 'sub' | 'mul' | 'maximum' | 'minimum' | 'neg' | 'abs' | 'floor_divide' | 'remainder' | 'fmod' | 'pow';

type Handle = StorageArray;

/** The int64 elements of a view, row-major. */
export function int64Values(x: Operand<Handle>): BigInt64Array {
  const words = x.handle as Int32Array;
  const idx = viewIndices(x.view);
  const out = new BigInt64Array(idx.length);
  const w = new Int32Array(out.buffer);
  for (let i = 0; i < idx.length; i++) {
    w[2 * i] = words[2 * idx[i]];
    w[2 * i + 1] = words[2 * idx[i] + 1];
  }
  return out;
}

/** int64 storage (2n words) of BigInt values. */
export function int64Storage(v: BigInt64Array): Int32Array {
  return new Int32Array(v.buffer.slice(v.byteOffset, v.byteOffset + v.byteLength));
}

/** torch's integer pow (ATen's powi), wrapping modulo 2^64 at every multiply; see i64_pow in int64-math.wgsl. */
function powi(a: bigint, b: bigint): bigint {
  if (b < 0n) return a === 1n ? 1n : a === -1n ? (b % 2n !== 0n ? -1n : 1n) : 0n;
  let r = 1n;
  for (let base = a, e = b; e > 0n; e >>= 1n, base = BigInt.asIntN(64, base * base)) if (e & 1n) r = BigInt.asIntN(64, r * base);
  return r;
}

const MAP: Record<Int64MapOp, (a: bigint, b: bigint) => bigint> = {
  add: (a, b) => a + b,
  sub: (a, b) => a - b,
  mul: (a, b) => a * b,
  maximum: (a, b) => (a < b ? b : a),
  minimum: (a, b) => (b < a ? b : a),
  neg: (a) => -a,
  abs: (a) => (a < 0n ? -a : a),
  // A zero divisor raises, as torch's CPU does; BigInt's / and % truncate toward zero.
  floor_divide: (a, b) => (b === 0n ? zeroDivisor('floor_divide') : a / b - (a % b !== 0n && a < 0n !== b < 0n ? 1n : 0n)),
  remainder: (a, b) => (b === 0n ? zeroDivisor('remainder') : a % b !== 0n && a < 0n !== b < 0n ? (a % b) + b : a % b),
  fmod: (a, b) => (b === 0n ? zeroDivisor('fmod') : a % b),
  pow: powi,
};

const COMPARE: Record<ComparisonOp, (a: bigint, b: bigint) => boolean> = {
  eq: (a, b) => a === b,
  ne: (a, b) => a !== b,
  lt: (a, b) => a < b,
  le: (a, b) => a <= b,
  gt: (a, b) => a > b,
  ge: (a, b) => a >= b,
};

export function int64BinaryReference(
  op: Int64MapOp | ComparisonOp,
  a: Operand<Handle>,
  b: Operand<Handle>,
  shape: Shape,
  scalar?: { side: 'a' | 'b'; value: bigint },
): Handle {
  const n = numel(shape);
  const side = (x: Operand<Handle>, which: 'a' | 'b') => (scalar?.side === which ? new BigInt64Array(n).fill(scalar.value) : int64Values(x));
  const va = side(a, 'a');
  const vb = side(b, 'b');
  if (op in COMPARE) {
    const f = COMPARE[op as ComparisonOp];
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i++) out[i] = f(va[i], vb[i]) ? 1 : 0;
    return out;
  }
  const f = MAP[op as Int64MapOp];
  // BigInt64Array stores wrap modulo 2^64 (BigInt.asIntN), which is torch's int64 overflow.
  const out = new BigInt64Array(n);
  for (let i = 0; i < n; i++) out[i] = f(va[i], vb[i]);
  return int64Storage(out);
}

const INT64_MAX = 2n ** 63n - 1n;
const INT64_MIN = -(2n ** 63n);

/** A float truncated toward zero to int64: NaN is 0, out of range saturates (as the GPU kernel). */
export function int64OfFloat(x: number): bigint {
  if (Number.isNaN(x)) return 0n;
  if (x >= 2 ** 63) return INT64_MAX;
  if (x <= -(2 ** 63)) return INT64_MIN;
  return BigInt(Math.trunc(x));
}

/** The float32 nearest to v (ties to even), from the exact integer. */
export function int64ToFloat32(v: bigint): number {
  const negative = v < 0n;
  const m = negative ? -v : v;
  const bits = m.toString(2).length;
  if (bits <= 24) return Number(v);
  const s = BigInt(bits - 24);
  let q = m >> s;
  const rem = m & ((1n << s) - 1n);
  const half = 1n << (s - 1n);
  if (rem > half || (rem === half && (q & 1n) === 1n)) q += 1n;
  const r = Number(q) * 2 ** Number(s);
  return negative ? -r : r;
}

/** int64 -> int32 for an index: the value when it fits, else INT32_MIN (which every index check refuses). */
function indexCode(v: bigint): number {
  return v >= -(2n ** 31n) && v < 2n ** 31n ? Number(v) : -2147483648;
}

export function int64CastReference(x: Operand<Handle>, to: DType, index: boolean): Handle {
  if (x.dtype !== 'int64') {
    const v = values(x);
    const out = new BigInt64Array(v.length);
    // values() decodes exactly (floats through their float32 value, integers as they are).
    for (let i = 0; i < v.length; i++) out[i] = isFloating(x.dtype) ? int64OfFloat(v[i]) : BigInt(v[i]);
    return int64Storage(out);
  }
  const v = int64Values(x);
  if (to === 'int64') return int64Storage(v);
  const out = allocStorage(index ? 'int32' : to, v.length);
  for (let i = 0; i < v.length; i++) {
    const e = v[i];
    if (index) out[i] = indexCode(e);
    else if (to === 'int32') out[i] = Number(BigInt.asIntN(32, e));
    else if (to === 'uint8') out[i] = Number(BigInt.asUintN(8, e));
    else if (to === 'bool') out[i] = e !== 0n ? 1 : 0;
    else out[i] = castCode(int64ToFloat32(e), to);
  }
  return out;
}

/** What int64Rows computes along each row: running sums (scan), a product, an extreme or its first index (sums: sumInt). */
export type Int64RowsOp = 'scan' | 'prod' | 'max' | 'min' | 'argmax' | 'argmin';

/** op along the last dim of x viewed as [rows, len] (int64 results; an arg op gives the index as int64). */
export function int64RowsReference(x: Operand<Handle>, rows: number, len: number, op: Int64RowsOp): Handle {
  const v = int64Values(x);
  const out = new BigInt64Array(op === 'scan' ? rows * len : rows);
  for (let r = 0; r < rows; r++) {
    const row = v.subarray(r * len, (r + 1) * len);
    if (op === 'scan' || op === 'prod') {
      let acc = op === 'prod' ? 1n : 0n;
      for (let j = 0; j < len; j++) {
        acc = BigInt.asIntN(64, op === 'prod' ? acc * row[j] : acc + row[j]);
        if (op === 'scan') out[r * len + j] = acc;
      }
      if (op === 'prod') out[r] = acc;
      continue;
    }
    const larger = op === 'max' || op === 'argmax';
    let best = 0;
    for (let j = 1; j < len; j++) if (larger ? row[j] > row[best] : row[j] < row[best]) best = j;
    out[r] = op === 'argmax' || op === 'argmin' ? BigInt(best) : row[best];
  }
  return int64Storage(out);
}
