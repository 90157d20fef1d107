// Exact conversions between float32 and the narrow float formats (float16, bfloat16, float8_e4m3fn, float8_e5m2),
// matching PyTorch's c10 casts bit for bit: round-to-nearest-even, correctly rounded subnormals, signed zeros,
// NaN -> the format's quiet NaN of the same sign. Encoders work on the float32 bit pattern with integer arithmetic
// only, so the same algorithm runs unchanged in WGSL (src/runtime/webgpu/kernels/dtype-codecs.wgsl), where float
// arithmetic may flush subnormals or drop NaNs.

import type { DType } from './dtype.js';
import { DTypeError } from './errors.js';

export type Fp8Format = 'e4m3fn' | 'e5m2';

/**
 * Storage array for `n` elements of dtype: Float32Array (float32), Uint16Array (float16/bfloat16 bits), Uint8Array
 * (fp8 codes, uint8, bool 0/1), Int32Array (int32; int64 as 2n words, lo then hi, the bytes of a little-endian
 * BigInt64Array, so files and GPU buffers take them as they are).
 */
export type StorageArray = Float32Array | Uint16Array | Uint8Array | Int32Array;

// One shared float32 <-> bits view; JS is single-threaded per realm, so reuse is safe and allocation-free.
const scratchF32 = new Float32Array(1);
const scratchU32 = new Uint32Array(scratchF32.buffer);

function f32BitsOf(x: number): number {
  scratchF32[0] = x;
  return scratchU32[0];
}

function f32FromBits(bits: number): number {
  scratchU32[0] = bits;
  return scratchF32[0];
}

/**
 * Rounds a finite float32 magnitude `a` (bits, sign cleared, below the format's overflow threshold) to the code of
 * a format with `mantBits` mantissa bits and exponent `bias`, to nearest, ties to even. Normal results rebias the
 * exponent in place and round off the low mantissa bits (a carry may step into the next binade, which is the right
 * answer); subnormal results shift the full significand so the format's smallest subnormal is 1 ulp.
 */
function roundToNarrow(a: number, mantBits: number, bias: number): number {
  const e = a >>> 23;
  let v: number;
  let s: number;
  if (e >= 128 - bias) {
    v = a - ((127 - bias) << 23);
    s = 23 - mantBits;
  } else {
    v = (a & 0x7fffff) | (e === 0 ? 0 : 0x800000);
    // Significands are below 2^24, so any shift past 25 rounds to zero exactly as 25 does.
    s = Math.min(151 - bias - mantBits - Math.max(e, 1), 25);
  }
  const q = v >>> s;
  const rem = v & ((1 << s) - 1);
  const halfway = 1 << (s - 1);
  return q + (rem > halfway || (rem === halfway && (q & 1) === 1) ? 1 : 0);
}

// Overflow thresholds are float32 bit patterns: the midpoint between the largest finite value and the next binade.
// For float16/bfloat16/e5m2 the largest finite mantissa is odd, so the midpoint itself rounds up to Inf; for
// e4m3fn the largest finite (448, mantissa 110) is even, so 464 rounds down and only values above 464 become NaN.

function f32BitsToF16Bits(u: number): number {
  const sign = (u >>> 16) & 0x8000;
  const a = u & 0x7fffffff;
  if (a > 0x7f800000) return sign | 0x7e00;
  if (a >= 0x477ff000) return sign | 0x7c00; // >= 65520 (incl. Inf)
  return sign | roundToNarrow(a, 10, 15);
}

function f32BitsToBf16Bits(u: number): number {
  if ((u & 0x7fffffff) > 0x7f800000) return ((u >>> 16) & 0x8000) | 0x7fc0;
  // bfloat16 shares float32's exponent: rounding the low 16 bits handles subnormals and overflow to Inf.
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}

function f32BitsToE4m3Bits(u: number, saturate: boolean): number {
  const sign = (u >>> 24) & 0x80;
  const a = u & 0x7fffffff;
  if (a > 0x7f800000) return sign | 0x7f;
  if (saturate && a > 0x43e00000) return sign | 0x7e; // > 448, Inf included
  if (a > 0x43e80000) return sign | 0x7f; // > 464: no Inf in e4m3fn, overflow is NaN
  return sign | roundToNarrow(a, 3, 7);
}

function f32BitsToE5m2Bits(u: number, saturate: boolean): number {
  const sign = (u >>> 24) & 0x80;
  const a = u & 0x7fffffff;
  if (a > 0x7f800000) return sign | 0x7f;
  if (saturate && a > 0x47600000) return sign | 0x7b; // > 57344, Inf included
  if (a >= 0x47700000) return sign | 0x7c; // >= 61440 (incl. Inf)
  return sign | roundToNarrow(a, 2, 15);
}

/**
 * Float32 bits of a narrow-format code. Subnormal codes become float32 normals, built directly from the leading-one
 * position. NaN codes decode to a quiet float32 NaN of the same sign, keeping the code's payload bits.
 */
function narrowToF32Bits(code: number, expBits: number, mantBits: number, bias: number, ieeeSpecials: boolean): number {
  const sign = ((code >>> (expBits + mantBits)) & 1) << 31;
  const expMax = (1 << expBits) - 1;
  const mantMax = (1 << mantBits) - 1;
  const e = (code >>> mantBits) & expMax;
  const m = code & mantMax;
  const mantShift = 23 - mantBits;
  if (ieeeSpecials ? e === expMax : e === expMax && m === mantMax) {
    if (ieeeSpecials && m === 0) return (sign | 0x7f800000) >>> 0;
    return (sign | 0x7fc00000 | (m << mantShift)) >>> 0;
  }
  if (e !== 0) return (sign | ((e + 127 - bias) << 23) | (m << mantShift)) >>> 0;
  if (m === 0) return sign >>> 0;
  const p = 31 - Math.clz32(m);
  return (sign | ((p + 127 - (bias - 1 + mantBits)) << 23) | ((m << (23 - p)) & 0x7fffff)) >>> 0;
}

// Decode tables, float32 bit patterns (with a Float32Array view of the same memory), built on first use.
let f16Table: Uint32Array | undefined;
let f16TableF32: Float32Array | undefined;
let e4m3Table: Uint32Array | undefined;
let e4m3TableF32: Float32Array | undefined;
let e5m2Table: Uint32Array | undefined;
let e5m2TableF32: Float32Array | undefined;

function buildTable(size: number, expBits: number, mantBits: number, bias: number, ieee: boolean): Uint32Array {
  const table = new Uint32Array(size);
  for (let c = 0; c < size; c++) table[c] = narrowToF32Bits(c, expBits, mantBits, bias, ieee);
  return table;
}

function f16Bits(): Uint32Array {
  if (!f16Table) {
    f16Table = buildTable(65536, 5, 10, 15, true);
    f16TableF32 = new Float32Array(f16Table.buffer);
  }
  return f16Table;
}

function f16Values(): Float32Array {
  f16Bits();
  return f16TableF32!;
}

function fp8Bits(format: Fp8Format): Uint32Array {
  if (format === 'e4m3fn') {
    if (!e4m3Table) {
      e4m3Table = buildTable(256, 4, 3, 7, false);
      e4m3TableF32 = new Float32Array(e4m3Table.buffer);
    }
    return e4m3Table;
  }
  if (format === 'e5m2') {
    if (!e5m2Table) {
      e5m2Table = buildTable(256, 5, 2, 15, true);
      e5m2TableF32 = new Float32Array(e5m2Table.buffer);
    }
    return e5m2Table;
  }
  throw new DTypeError(`unknown fp8 format '${String(format)}'; expected 'e4m3fn' or 'e5m2'`);
}

function fp8Values(format: Fp8Format): Float32Array {
  fp8Bits(format);
  return format === 'e4m3fn' ? e4m3TableF32! : e5m2TableF32!;
}

/** float32 -> float16 bits: `x` is first rounded to float32 (Math.fround), then to nearest-even binary16. */
export function f32ToF16Bits(x: number): number {
  return f32BitsToF16Bits(f32BitsOf(x));
}

export function f16BitsToF32(bits: number): number {
  return f16Values()[bits & 0xffff];
}

/** float32 -> bfloat16 bits, nearest-even; NaN -> quiet NaN 0x7FC0 with the input's sign. */
export function f32ToBf16Bits(x: number): number {
  return f32BitsToBf16Bits(f32BitsOf(x));
}

export function bf16BitsToF32(bits: number): number {
  return f32FromBits((bits & 0xffff) << 16);
}

/**
 * float32 -> fp8 code. Default is PyTorch's eager cast: e4m3fn overflow (|x| > 464 after rounding, Inf) is NaN,
 * e5m2 overflow is Inf. `saturate` clamps finite and infinite values to +-max finite (448 / 57344); NaN stays NaN.
 */
export function f32ToFp8Bits(x: number, format: Fp8Format, saturate = false): number {
  const u = f32BitsOf(x);
  if (format === 'e4m3fn') return f32BitsToE4m3Bits(u, saturate);
  if (format === 'e5m2') return f32BitsToE5m2Bits(u, saturate);
  throw new DTypeError(`unknown fp8 format '${String(format)}'; expected 'e4m3fn' or 'e5m2'`);
}

export function fp8BitsToF32(bits: number, format: Fp8Format): number {
  return fp8Values(format)[bits & 0xff];
}

export function allocStorage(dtype: DType, n: number): StorageArray {
  switch (dtype) {
    case 'float32':
      return new Float32Array(n);
    case 'float16':
    case 'bfloat16':
      return new Uint16Array(n);
    case 'float8_e4m3fn':
    case 'float8_e5m2':
    case 'uint8':
    case 'bool':
      return new Uint8Array(n);
    case 'int32':
      return new Int32Array(n);
    case 'int64':
      return new Int32Array(2 * n);
    default:
      throw new DTypeError(`unknown dtype '${String(dtype)}'`);
  }
}

const TWO32 = 2 ** 32;

/**
 * int64 storage (2n words) of JS numbers: fractions truncate toward zero (torch.tensor([1.7], dtype=torch.int64) is
 * 1); a value whose integer part is not a safe integer (|x| > 2^53 - 1, NaN, Inf) is a RangeError, since a double
 * there no longer names one integer: pass a BigInt64Array instead.
 */
export function encodeInt64(values: ArrayLike<number> | ArrayLike<bigint>): Int32Array {
  const n = values.length;
  const out = new Int32Array(2 * n);
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (typeof v === 'bigint') {
      const w = BigInt.asIntN(64, v);
      if (w !== v) throw new RangeError(`int64: ${v} is outside int64's range [-2^63, 2^63 - 1]`);
      out[2 * i] = Number(BigInt.asIntN(32, w));
      out[2 * i + 1] = Number(w >> 32n);
      continue;
    }
    const t = Math.trunc(v);
    if (!Number.isSafeInteger(t))
      throw new RangeError(`int64: ${v} is not a safe integer (|x| <= 2^53 - 1): a number past 2^53 names no single integer; pass a BigInt64Array`);
    const hi = Math.floor(t / TWO32);
    out[2 * i] = t - hi * TWO32; // the Int32Array store wraps the low word
    out[2 * i + 1] = hi;
  }
  return out;
}

/** int64 storage words (lo, hi per element) as a BigInt64Array (a copy). */
export function decodeInt64(storage: Int32Array): BigInt64Array {
  const out = new BigInt64Array(storage.length >> 1);
  new Int32Array(out.buffer).set(storage);
  return out;
}

/** The value of int64 words as a JS number; a RangeError when it is not a safe integer (read it as a BigInt64Array). */
export function int64Number(lo: number, hi: number): number {
  const v = hi * TWO32 + (lo >>> 0);
  if (!Number.isSafeInteger(v))
    throw new RangeError(`int64 value ${(BigInt(hi) << 32n) | BigInt(lo >>> 0)} is not a safe integer for a JS number; use toBigInt64Array()`);
  return v;
}

/**
 * Encode numbers into storage (float: as above, with `saturate` for fp8; int32: truncate toward zero then wrap like
 * Int32Array; uint8: wrap mod 256 like Uint8Array; bool: x !== 0 (NaN -> true)).
 */
export function encodeValues(dtype: DType, values: ArrayLike<number>, options?: { saturate?: boolean }): StorageArray {
  const n = values.length;
  if (dtype === 'int64') return encodeInt64(values);
  const saturate = options?.saturate ?? false;
  switch (dtype) {
    case 'float32':
    case 'int32':
    case 'uint8': {
      // Typed-array stores already apply fround / ToInt32 / ToUint8, which are exactly the rules wanted.
      const out = allocStorage(dtype, n);
      for (let i = 0; i < n; i++) out[i] = values[i];
      return out;
    }
    case 'bool': {
      const out = new Uint8Array(n);
      for (let i = 0; i < n; i++) out[i] = values[i] !== 0 ? 1 : 0;
      return out;
    }
    case 'float16':
    case 'bfloat16':
    case 'float8_e4m3fn':
    case 'float8_e5m2': {
      // Round to float32 in one pass, then encode from the bit view (no per-element scratch round-trip).
      const wide = new Float32Array(n);
      for (let i = 0; i < n; i++) wide[i] = values[i];
      const bits = new Uint32Array(wide.buffer);
      if (dtype === 'float16') {
        const out = new Uint16Array(n);
        for (let i = 0; i < n; i++) out[i] = f32BitsToF16Bits(bits[i]);
        return out;
      }
      if (dtype === 'bfloat16') {
        const out = new Uint16Array(n);
        for (let i = 0; i < n; i++) out[i] = f32BitsToBf16Bits(bits[i]);
        return out;
      }
      const out = new Uint8Array(n);
      if (dtype === 'float8_e4m3fn') for (let i = 0; i < n; i++) out[i] = f32BitsToE4m3Bits(bits[i], saturate);
      else for (let i = 0; i < n; i++) out[i] = f32BitsToE5m2Bits(bits[i], saturate);
      return out;
    }
    default:
      throw new DTypeError(`unknown dtype '${String(dtype)}'`);
  }
}

/** One storage code/bits -> number. */
export function decodeOne(dtype: DType, code: number): number {
  switch (dtype) {
    case 'float32':
      return Math.fround(code);
    case 'float16':
      return f16BitsToF32(code);
    case 'bfloat16':
      return bf16BitsToF32(code);
    case 'float8_e4m3fn':
      return fp8BitsToF32(code, 'e4m3fn');
    case 'float8_e5m2':
      return fp8BitsToF32(code, 'e5m2');
    case 'int32':
      return code | 0;
    case 'uint8':
      return code & 0xff;
    case 'bool':
      return code !== 0 ? 1 : 0;
    case 'int64':
      throw new DTypeError('int64: an element is two storage words, not one code (decodeInt64 / int64Number)');
    default:
      throw new DTypeError(`unknown dtype '${String(dtype)}'`);
  }
}

/** One number -> storage code (same rules as encodeValues). */
export function encodeOne(dtype: DType, x: number, saturate = false): number {
  switch (dtype) {
    case 'float32':
      return Math.fround(x);
    case 'float16':
      return f32ToF16Bits(x);
    case 'bfloat16':
      return f32ToBf16Bits(x);
    case 'float8_e4m3fn':
      return f32ToFp8Bits(x, 'e4m3fn', saturate);
    case 'float8_e5m2':
      return f32ToFp8Bits(x, 'e5m2', saturate);
    case 'int32':
      return x | 0;
    case 'uint8':
      return (x | 0) & 0xff;
    case 'bool':
      return x !== 0 ? 1 : 0;
    case 'int64':
      throw new DTypeError('int64: an element is two storage words, not one code (encodeInt64)');
    default:
      throw new DTypeError(`unknown dtype '${String(dtype)}'`);
  }
}

const STORAGE_NAME: Readonly<Record<DType, string>> = {
  float32: 'Float32Array',
  float16: 'Uint16Array',
  bfloat16: 'Uint16Array',
  float8_e4m3fn: 'Uint8Array',
  float8_e5m2: 'Uint8Array',
  int32: 'Int32Array',
  uint8: 'Uint8Array',
  bool: 'Uint8Array',
  int64: 'Int32Array',
};

function checkStorage(dtype: DType, storage: StorageArray): void {
  const expected = STORAGE_NAME[dtype];
  if (expected === undefined) throw new DTypeError(`unknown dtype '${String(dtype)}'`);
  const ok =
    (expected === 'Float32Array' && storage instanceof Float32Array) ||
    (expected === 'Uint16Array' && storage instanceof Uint16Array) ||
    (expected === 'Uint8Array' && storage instanceof Uint8Array) ||
    (expected === 'Int32Array' && storage instanceof Int32Array);
  if (!ok) {
    throw new DTypeError(`storage for dtype '${dtype}' must be a ${expected}, got ${storage.constructor.name}`);
  }
  if (dtype === 'int64' && storage.length % 2 !== 0) throw new DTypeError(`int64 storage holds two words an element, got ${storage.length} words`);
}

/** Decode storage into the widened array users get from toArray(): Float32Array for all floats, Int32Array for int32, Uint8Array for uint8 and bool. */
export function decodeStorage(dtype: DType, storage: StorageArray): Float32Array | Int32Array | Uint8Array {
  checkStorage(dtype, storage);
  // toArray()'s type has no room for a BigInt64Array without breaking every caller that does arithmetic on it.
  if (dtype === 'int64') throw new DTypeError('toArray() of an int64 tensor: use toBigInt64Array(), or tolist()/item() for values that are safe integers');
  const n = storage.length;
  switch (dtype) {
    case 'float32':
      return (storage as Float32Array).slice();
    case 'int32':
      return (storage as Int32Array).slice();
    case 'uint8':
    case 'bool':
      return (storage as Uint8Array).slice();
    case 'bfloat16': {
      // Writing bit patterns (not numbers) keeps NaN signs and payloads exactly.
      const out = new Float32Array(n);
      const outBits = new Uint32Array(out.buffer);
      for (let i = 0; i < n; i++) outBits[i] = storage[i] << 16;
      return out;
    }
    default: {
      const table = dtype === 'float16' ? f16Bits() : fp8Bits(dtype === 'float8_e4m3fn' ? 'e4m3fn' : 'e5m2');
      const out = new Float32Array(n);
      const outBits = new Uint32Array(out.buffer);
      for (let i = 0; i < n; i++) outBits[i] = table[storage[i]];
      return out;
    }
  }
}

/** A value stored as `dtype`: int32 and uint8 truncate and wrap as torch's integer casts do (NaN -> 0), bool is x != 0, floats round. */
export function castCode(x: number, dtype: DType, saturate = false): number {
  switch (dtype) {
    case 'int32':
      return Number.isNaN(x) ? 0 : Math.max(-2147483648, Math.min(2147483647, Math.trunc(x)));
    case 'uint8':
      return Number.isNaN(x) ? 0 : Math.max(-2147483648, Math.min(2147483647, Math.trunc(x))) & 255;
    case 'bool':
      return x !== 0 ? 1 : 0;
    case 'int64':
      throw new DTypeError('int64: an element is two storage words, not one code');
    default:
      return encodeOne(dtype, x, saturate);
  }
}

/** A number operand's value once rounded to its own dtype (float32 or int32), as kernels receive it. */
export function scalarValue(x: { readonly scalar: number; readonly dtype: DType }): number {
  return decodeOne(x.dtype, castCode(x.scalar, x.dtype));
}
