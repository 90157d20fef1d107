// Exhaustive checks of the float16 / bfloat16 / fp8 codecs against expectations computed here independently: the
// decode formula sign * 2^(e-bias) * (1 + m/2^mbits) (subnormal: 2^(1-bias) * m/2^mbits), and a reference encoder
// that searches the sorted table of representable values for the nearest one, ties to the even code.

import { describe, expect, it } from 'vitest';
import {
  allocStorage,
  bf16BitsToF32,
  decodeOne,
  decodeStorage,
  encodeOne,
  encodeValues,
  f16BitsToF32,
  f32ToBf16Bits,
  f32ToF16Bits,
  f32ToFp8Bits,
  fp8BitsToF32,
} from '../../src/core/codecs.js';
import { DTYPES, type DType } from '../../src/core/dtype.js';
import { DTypeError } from '../../src/core/errors.js';
import { mulberry32 } from '../helpers/reference.js';

interface Format {
  name: string;
  expBits: number;
  mantBits: number;
  bias: number;
  /** IEEE-style specials (all-ones exponent = Inf/NaN); false for e4m3fn (only S.1111.111 is NaN, no Inf). */
  ieee: boolean;
  maxFiniteCode: number;
  canonicalNaN: number;
  encode: (x: number, saturate?: boolean) => number;
  decode: (code: number) => number;
  saturating: boolean;
}

const FORMATS: Format[] = [
  {
    name: 'float16',
    expBits: 5,
    mantBits: 10,
    bias: 15,
    ieee: true,
    maxFiniteCode: 0x7bff,
    canonicalNaN: 0x7e00,
    encode: (x) => f32ToF16Bits(x),
    decode: f16BitsToF32,
    saturating: false,
  },
  {
    name: 'bfloat16',
    expBits: 8,
    mantBits: 7,
    bias: 127,
    ieee: true,
    maxFiniteCode: 0x7f7f,
    canonicalNaN: 0x7fc0,
    encode: (x) => f32ToBf16Bits(x),
    decode: bf16BitsToF32,
    saturating: false,
  },
  {
    name: 'e4m3fn',
    expBits: 4,
    mantBits: 3,
    bias: 7,
    ieee: false,
    maxFiniteCode: 0x7e,
    canonicalNaN: 0x7f,
    encode: (x, saturate) => f32ToFp8Bits(x, 'e4m3fn', saturate),
    decode: (c) => fp8BitsToF32(c, 'e4m3fn'),
    saturating: true,
  },
  {
    name: 'e5m2',
    expBits: 5,
    mantBits: 2,
    bias: 15,
    ieee: true,
    maxFiniteCode: 0x7b,
    canonicalNaN: 0x7f,
    encode: (x, saturate) => f32ToFp8Bits(x, 'e5m2', saturate),
    decode: (c) => fp8BitsToF32(c, 'e5m2'),
    saturating: true,
  },
];

const totalBits = (f: Format): number => 1 + f.expBits + f.mantBits;
const signBit = (f: Format): number => 1 << (f.expBits + f.mantBits);

function refDecode(f: Format, code: number): number {
  const s = code & signBit(f) ? -1 : 1;
  const expMax = 2 ** f.expBits - 1;
  const mantMax = 2 ** f.mantBits - 1;
  const e = Math.floor(code / 2 ** f.mantBits) % 2 ** f.expBits;
  const m = code % 2 ** f.mantBits;
  if (f.ieee && e === expMax) return m === 0 ? s * Infinity : NaN;
  if (!f.ieee && e === expMax && m === mantMax) return NaN;
  if (e === 0) return s * 2 ** (1 - f.bias) * (m / 2 ** f.mantBits);
  return s * 2 ** (e - f.bias) * (1 + m / 2 ** f.mantBits);
}

function isNaNCode(f: Format, code: number): boolean {
  return Number.isNaN(refDecode(f, code));
}

/**
 * Positive values by code, 0..maxFiniteCode, plus one virtual entry: the value the next code would have if the
 * exponent range went on (largest finite + its ulp). That code (maxFiniteCode + 1) is each format's overflow code:
 * Inf for float16/bfloat16/e5m2, NaN (0x7F) for e4m3fn.
 */
const valueTables = new Map<Format, Float64Array>();
function positiveValues(f: Format): Float64Array {
  let t = valueTables.get(f);
  if (!t) {
    t = new Float64Array(f.maxFiniteCode + 2);
    for (let c = 0; c <= f.maxFiniteCode; c++) t[c] = refDecode(f, c);
    const max = t[f.maxFiniteCode];
    t[f.maxFiniteCode + 1] = max + (max - t[f.maxFiniteCode - 1]);
    valueTables.set(f, t);
  }
  return t;
}

/** Nearest representable, ties to even code; written from the value table only. `x` must already be a float32. */
function refEncode(f: Format, x: number, saturate = false): number {
  if (Number.isNaN(x)) throw new Error('refEncode takes no NaN');
  const sign = x < 0 || Object.is(x, -0) ? signBit(f) : 0;
  const ax = Math.abs(x);
  const t = positiveValues(f);
  const overflow = f.maxFiniteCode + 1;
  if (saturate && ax > t[f.maxFiniteCode]) return sign | f.maxFiniteCode;
  if (ax >= t[overflow]) return sign | overflow;
  let lo = 0;
  let hi = overflow; // t[lo] <= ax < t[hi]
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (t[mid] <= ax) lo = mid;
    else hi = mid;
  }
  let code: number;
  if (t[lo] === ax) code = lo;
  else {
    const dLo = ax - t[lo];
    const dHi = t[hi] - ax;
    code = dLo < dHi ? lo : dHi < dLo ? hi : lo % 2 === 0 ? lo : hi;
  }
  if (saturate && code === overflow) code = f.maxFiniteCode;
  return sign | code;
}

// Independent float32 bit helpers (DataView, not the module under test).
const dv = new DataView(new ArrayBuffer(4));
function f32FromBits(bits: number): number {
  dv.setUint32(0, bits >>> 0);
  return dv.getFloat32(0);
}
function bitsOfF32(x: number): number {
  dv.setFloat32(0, x);
  return dv.getUint32(0);
}
const nextUp = (x: number): number => f32FromBits(bitsOfF32(x) + 1); // x > 0
const nextDown = (x: number): number => f32FromBits(bitsOfF32(x) - 1); // x > 0

// NaN with the sign bit set, as a JS number: typed-array loads keep the sign of a float32 NaN.
const negNaN = new Float32Array(new Uint32Array([0xffc00000]).buffer)[0];

const hex = (n: number): string => `0x${(n >>> 0).toString(16)}`;

/** Collects up to 10 failures so one exhaustive loop reports what went wrong without 65536 expects. */
class Mismatches {
  readonly list: string[] = [];
  count = 0;
  add(msg: string): void {
    if (this.list.length < 10) this.list.push(msg);
    this.count++;
  }
  check(): void {
    expect(this.list, `${this.count} mismatches`).toEqual([]);
  }
}

describe.each(FORMATS)('$name codec', (f) => {
  const nCodes = 2 ** totalBits(f);

  it('decodes every code to sign * 2^(e-bias) * (1 + m/2^mbits) (or the subnormal/special value)', () => {
    const bad = new Mismatches();
    for (let c = 0; c < nCodes; c++) {
      const want = refDecode(f, c);
      const got = f.decode(c);
      const ok = Number.isNaN(want) ? Number.isNaN(got) : Object.is(got, want);
      if (!ok) bad.add(`${hex(c)}: got ${got}, want ${want}`);
    }
    bad.check();
  });

  it('round-trips every code through decode -> encode (NaN codes -> canonical NaN of that sign)', () => {
    const bad = new Mismatches();
    for (let c = 0; c < nCodes; c++) {
      const want = isNaNCode(f, c) ? (c & signBit(f)) | f.canonicalNaN : c;
      const got = f.encode(f.decode(c));
      if (got !== want) bad.add(`${hex(c)} -> ${hex(got)}, want ${hex(want)}`);
      if (f.saturating) {
        const inf = f.ieee && Math.abs(refDecode(f, c)) === Infinity;
        const wantSat = inf ? (c & signBit(f)) | f.maxFiniteCode : want;
        const gotSat = f.encode(f.decode(c), true);
        if (gotSat !== wantSat) bad.add(`saturate ${hex(c)} -> ${hex(gotSat)}, want ${hex(wantSat)}`);
      }
    }
    bad.check();
  });

  it('rounds midpoints between adjacent codes to the even code, and +-1 float32 ulp to the nearer code', () => {
    const t = positiveValues(f);
    const bad = new Mismatches();
    const overflow = f.maxFiniteCode + 1;
    for (let c = 0; c < overflow; c++) {
      const mid = (t[c] + t[c + 1]) / 2;
      if (Math.fround(mid) !== mid) {
        bad.add(`midpoint of ${hex(c)} is not a float32`);
        continue;
      }
      const even = c % 2 === 0 ? c : c + 1;
      const cases: Array<[number, number]> = [
        [mid, even],
        [nextDown(mid), c],
        [nextUp(mid), c + 1],
      ];
      for (const [x, code] of cases) {
        for (const s of [1, -1]) {
          const sign = s < 0 ? signBit(f) : 0;
          const got = f.encode(s * x);
          if (got !== (sign | code)) bad.add(`${s * x} -> ${hex(got)}, want ${hex(sign | code)}`);
          if (f.saturating) {
            const satCode = code === overflow ? f.maxFiniteCode : code;
            const gotSat = f.encode(s * x, true);
            if (gotSat !== (sign | satCode)) bad.add(`sat ${s * x} -> ${hex(gotSat)}, want ${hex(sign | satCode)}`);
          }
        }
      }
    }
    bad.check();
  });

  it('matches the nearest-value reference on seeded random float32 bit patterns', () => {
    const rand = mulberry32(0x5eed ^ nCodes);
    const bad = new Mismatches();
    for (let i = 0; i < 100_000; i++) {
      let bits = rand();
      // Half the samples keep the exponent near the format's range, where rounding is interesting.
      if (i % 2 === 1) {
        const lowExp = Math.max(1, 127 - f.bias - f.mantBits - 3);
        const highExp = Math.min(254, 127 + 2 ** f.expBits - f.bias + 1);
        const e = lowExp + (rand() % (highExp - lowExp + 1));
        bits = ((bits & 0x807fffff) | (e << 23)) >>> 0;
      }
      const x = f32FromBits(bits);
      if (Number.isNaN(x)) {
        const want = (bits >>> 31 ? signBit(f) : 0) | f.canonicalNaN;
        if (f.encode(x) !== want) bad.add(`NaN ${hex(bits)} -> ${hex(f.encode(x))}`);
        continue;
      }
      const want = refEncode(f, x);
      const got = f.encode(x);
      if (got !== want) bad.add(`${x} (${hex(bits)}) -> ${hex(got)}, want ${hex(want)}`);
      if (f.saturating) {
        const wantSat = refEncode(f, x, true);
        const gotSat = f.encode(x, true);
        if (gotSat !== wantSat) bad.add(`sat ${x} (${hex(bits)}) -> ${hex(gotSat)}, want ${hex(wantSat)}`);
      }
    }
    bad.check();
  });

  it('keeps signed zeros, maps NaN to the canonical NaN of the same sign', () => {
    expect(f.encode(0)).toBe(0);
    expect(f.encode(-0)).toBe(signBit(f));
    expect(Object.is(f.decode(0), 0)).toBe(true);
    expect(Object.is(f.decode(signBit(f)), -0)).toBe(true);
    expect(f.encode(NaN)).toBe(f.canonicalNaN);
    expect(f.encode(negNaN)).toBe(signBit(f) | f.canonicalNaN);
    if (f.saturating) {
      expect(f.encode(NaN, true)).toBe(f.canonicalNaN);
      expect(f.encode(negNaN, true)).toBe(signBit(f) | f.canonicalNaN);
    }
  });

  it('maps values below half the smallest subnormal to signed zero, and rounds f32 subnormals', () => {
    const minSub = 2 ** (1 - f.bias - f.mantBits);
    const halfMin = minSub / 2; // ties to even: 0
    for (const s of [1, -1]) {
      const sign = s < 0 ? signBit(f) : 0;
      expect(f.encode(s * halfMin)).toBe(sign);
      expect(f.encode(s * nextDown(halfMin))).toBe(sign);
      expect(f.encode(s * nextUp(halfMin))).toBe(sign | 1);
      expect(f.encode(s * minSub)).toBe(sign | 1);
      expect(f.encode(s * 1.5 * minSub)).toBe(sign | 2);
      // float32 subnormals: smallest and largest.
      const tiny = f32FromBits(1);
      const bigSub = f32FromBits(0x007fffff);
      expect(f.encode(s * tiny)).toBe(sign);
      expect(f.encode(s * bigSub)).toBe(f.name === 'bfloat16' ? sign | 0x0080 : sign);
    }
  });
});

describe('known values', () => {
  it('float8_e4m3fn', () => {
    expect(f32ToFp8Bits(448, 'e4m3fn')).toBe(0x7e);
    expect(fp8BitsToF32(0x7e, 'e4m3fn')).toBe(448);
    expect(fp8BitsToF32(0xfe, 'e4m3fn')).toBe(-448);
    expect(f32ToFp8Bits(2 ** -9, 'e4m3fn')).toBe(0x01);
    expect(fp8BitsToF32(0x01, 'e4m3fn')).toBe(2 ** -9);
    expect(fp8BitsToF32(0x08, 'e4m3fn')).toBe(2 ** -6);
    expect(fp8BitsToF32(0x38, 'e4m3fn')).toBe(1);
    expect(f32ToFp8Bits(1, 'e4m3fn')).toBe(0x38);
    expect(f32ToFp8Bits(-2, 'e4m3fn')).toBe(0xc0);
    expect(fp8BitsToF32(0x7f, 'e4m3fn')).toBeNaN();
    expect(fp8BitsToF32(0xff, 'e4m3fn')).toBeNaN();
    // 0x78..0x7e are finite in e4m3fn (no Inf).
    expect(fp8BitsToF32(0x78, 'e4m3fn')).toBe(256);
  });

  it('float8_e4m3fn overflow: 464 rounds to 448, above 464 is NaN, Inf is NaN', () => {
    expect(f32ToFp8Bits(449, 'e4m3fn')).toBe(0x7e);
    expect(f32ToFp8Bits(464, 'e4m3fn')).toBe(0x7e);
    expect(f32ToFp8Bits(-464, 'e4m3fn')).toBe(0xfe);
    expect(f32ToFp8Bits(nextUp(464), 'e4m3fn')).toBe(0x7f);
    expect(f32ToFp8Bits(-nextUp(464), 'e4m3fn')).toBe(0xff);
    expect(f32ToFp8Bits(480, 'e4m3fn')).toBe(0x7f);
    expect(f32ToFp8Bits(1e30, 'e4m3fn')).toBe(0x7f);
    expect(f32ToFp8Bits(Infinity, 'e4m3fn')).toBe(0x7f);
    expect(f32ToFp8Bits(-Infinity, 'e4m3fn')).toBe(0xff);
    // saturate: clamp to +-448, Inf too; NaN stays NaN.
    expect(f32ToFp8Bits(nextUp(464), 'e4m3fn', true)).toBe(0x7e);
    expect(f32ToFp8Bits(1e30, 'e4m3fn', true)).toBe(0x7e);
    expect(f32ToFp8Bits(-1e30, 'e4m3fn', true)).toBe(0xfe);
    expect(f32ToFp8Bits(Infinity, 'e4m3fn', true)).toBe(0x7e);
    expect(f32ToFp8Bits(-Infinity, 'e4m3fn', true)).toBe(0xfe);
    expect(f32ToFp8Bits(NaN, 'e4m3fn', true)).toBe(0x7f);
    expect(f32ToFp8Bits(300, 'e4m3fn', true)).toBe(f32ToFp8Bits(300, 'e4m3fn'));
  });

  it('float8_e5m2', () => {
    expect(f32ToFp8Bits(57344, 'e5m2')).toBe(0x7b);
    expect(fp8BitsToF32(0x7b, 'e5m2')).toBe(57344);
    expect(f32ToFp8Bits(2 ** -16, 'e5m2')).toBe(0x01);
    expect(fp8BitsToF32(0x01, 'e5m2')).toBe(2 ** -16);
    expect(fp8BitsToF32(0x04, 'e5m2')).toBe(2 ** -14);
    expect(fp8BitsToF32(0x7c, 'e5m2')).toBe(Infinity);
    expect(fp8BitsToF32(0xfc, 'e5m2')).toBe(-Infinity);
    for (const c of [0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff]) expect(fp8BitsToF32(c, 'e5m2')).toBeNaN();
    expect(f32ToFp8Bits(nextDown(61440), 'e5m2')).toBe(0x7b);
    expect(f32ToFp8Bits(61440, 'e5m2')).toBe(0x7c);
    expect(f32ToFp8Bits(1e9, 'e5m2')).toBe(0x7c);
    expect(f32ToFp8Bits(Infinity, 'e5m2')).toBe(0x7c);
    expect(f32ToFp8Bits(-Infinity, 'e5m2')).toBe(0xfc);
    expect(f32ToFp8Bits(61440, 'e5m2', true)).toBe(0x7b);
    expect(f32ToFp8Bits(Infinity, 'e5m2', true)).toBe(0x7b);
    expect(f32ToFp8Bits(-Infinity, 'e5m2', true)).toBe(0xfb);
    expect(f32ToFp8Bits(NaN, 'e5m2', true)).toBe(0x7f);
  });

  it('float16', () => {
    expect(f32ToF16Bits(65504)).toBe(0x7bff);
    expect(f16BitsToF32(0x7bff)).toBe(65504);
    expect(f32ToF16Bits(2 ** -24)).toBe(0x0001);
    expect(f16BitsToF32(0x0001)).toBe(2 ** -24);
    expect(f16BitsToF32(0x0400)).toBe(2 ** -14);
    expect(f32ToF16Bits(1)).toBe(0x3c00);
    expect(f32ToF16Bits(1 / 3)).toBe(0x3555);
    expect(f32ToF16Bits(65519)).toBe(0x7bff);
    expect(f32ToF16Bits(65520)).toBe(0x7c00);
    expect(f32ToF16Bits(Infinity)).toBe(0x7c00);
    expect(f32ToF16Bits(-Infinity)).toBe(0xfc00);
    expect(f16BitsToF32(0x7c00)).toBe(Infinity);
    expect(f16BitsToF32(0x7c01)).toBeNaN();
    expect(f32ToF16Bits(NaN)).toBe(0x7e00);
    expect(f32ToF16Bits(negNaN)).toBe(0xfe00);
  });

  it('bfloat16', () => {
    expect(f32ToBf16Bits(1 / 3)).toBe(0x3eab);
    expect(bf16BitsToF32(0x3eab)).toBe(f32FromBits(0x3eab0000));
    expect(f32ToBf16Bits(1)).toBe(0x3f80);
    expect(f32ToBf16Bits(f32FromBits(0x7f7fffff))).toBe(0x7f80); // FLT_MAX rounds to Inf
    expect(f32ToBf16Bits(f32FromBits(0x7f7f7fff))).toBe(0x7f7f);
    expect(f32ToBf16Bits(Infinity)).toBe(0x7f80);
    expect(f32ToBf16Bits(-Infinity)).toBe(0xff80);
    expect(f32ToBf16Bits(NaN)).toBe(0x7fc0);
    expect(f32ToBf16Bits(negNaN)).toBe(0xffc0);
    // A float32 NaN whose payload sits only in the low 16 bits must stay NaN, not become Inf.
    expect(f32ToBf16Bits(f32FromBits(0x7f800001))).toBe(0x7fc0);
    // float32 subnormals round at bit 16 like everything else: 0x8000 is half of bf16's smallest subnormal.
    expect(f32ToBf16Bits(f32FromBits(0x00008000))).toBe(0x0000);
    expect(f32ToBf16Bits(f32FromBits(0x00008001))).toBe(0x0001);
    expect(f32ToBf16Bits(f32FromBits(0x00018000))).toBe(0x0002);
    expect(f32ToBf16Bits(f32FromBits(0x80018000))).toBe(0x8002);
  });

  it('rounds the JS number to float32 first (double rounding, as casting through float does)', () => {
    // 1 + 2^-11 + 2^-40 rounds to the float32 1 + 2^-11, a float16 tie that goes to the even 1.0.
    expect(f32ToF16Bits(1 + 2 ** -11 + 2 ** -40)).toBe(0x3c00);
    expect(f32ToF16Bits(1 + 2 ** -11 + 2 ** -20)).toBe(0x3c01);
    expect(f32ToBf16Bits(1 + 2 ** -8 + 2 ** -40)).toBe(0x3f80);
    expect(f32ToFp8Bits(1 + 2 ** -4 + 2 ** -40, 'e4m3fn')).toBe(0x38);
  });

  it('rejects an unknown fp8 format', () => {
    expect(() => f32ToFp8Bits(1, 'e3m4' as never)).toThrow(DTypeError);
    expect(() => fp8BitsToF32(1, 'e3m4' as never)).toThrow(DTypeError);
  });
});

describe('storage helpers', () => {
  const rand = mulberry32(42);
  const sample: number[] = [0, -0, 1, -1, 0.1, 1 / 3, 448, 464, 465, 1e5, -1e5, 65520, 2 ** -20, Infinity, -Infinity, NaN];
  for (let i = 0; i < 2000; i++) sample.push((rand() / 2 ** 32 - 0.5) * 2 ** ((rand() % 60) - 30));

  it('allocStorage picks the storage array per dtype', () => {
    expect(allocStorage('float32', 3)).toBeInstanceOf(Float32Array);
    expect(allocStorage('float16', 3)).toBeInstanceOf(Uint16Array);
    expect(allocStorage('bfloat16', 3)).toBeInstanceOf(Uint16Array);
    expect(allocStorage('float8_e4m3fn', 3)).toBeInstanceOf(Uint8Array);
    expect(allocStorage('float8_e5m2', 3)).toBeInstanceOf(Uint8Array);
    expect(allocStorage('int32', 3)).toBeInstanceOf(Int32Array);
    expect(allocStorage('uint8', 3)).toBeInstanceOf(Uint8Array);
    expect(allocStorage('bool', 3)).toBeInstanceOf(Uint8Array);
    expect(allocStorage('float16', 5).length).toBe(5);
    expect(() => allocStorage('float64' as DType, 1)).toThrow(DTypeError);
  });

  it('encodeValues / encodeOne agree with the scalar codecs for every float dtype', () => {
    const cases: Array<[DType, (x: number, sat: boolean) => number]> = [
      ['float16', (x) => f32ToF16Bits(x)],
      ['bfloat16', (x) => f32ToBf16Bits(x)],
      ['float8_e4m3fn', (x, sat) => f32ToFp8Bits(x, 'e4m3fn', sat)],
      ['float8_e5m2', (x, sat) => f32ToFp8Bits(x, 'e5m2', sat)],
    ];
    for (const [dtype, scalar] of cases) {
      for (const saturate of [false, true]) {
        const enc = encodeValues(dtype, sample, { saturate });
        expect(enc.length).toBe(sample.length);
        const want = sample.map((x) => scalar(x, saturate));
        expect(Array.from(enc), `${dtype} saturate=${saturate}`).toEqual(want);
        expect(sample.map((x) => encodeOne(dtype, x, saturate))).toEqual(want);
      }
    }
    expect(encodeValues('float8_e4m3fn', [1000])[0]).toBe(0x7f);
    expect(encodeValues('float8_e4m3fn', [1000], { saturate: true })[0]).toBe(0x7e);
    const f32 = encodeValues('float32', [0.1, -0, NaN]);
    expect(f32).toBeInstanceOf(Float32Array);
    expect(Array.from(f32)).toEqual([Math.fround(0.1), -0, NaN]);
    expect(encodeOne('float32', 0.1)).toBe(Math.fround(0.1));
  });

  it('integer and bool encodings: int32 truncates and wraps, uint8 wraps mod 256, bool is x !== 0', () => {
    const ints = [0, 1.9, -1.9, 2 ** 31, 2 ** 32 + 5, -(2 ** 31) - 1, NaN, Infinity, -Infinity, 1e20];
    const i32 = encodeValues('int32', ints);
    expect(i32).toBeInstanceOf(Int32Array);
    expect(Array.from(i32)).toEqual([0, 1, -1, -(2 ** 31), 5, 2 ** 31 - 1, 0, 0, 0, 1661992960]);
    expect(ints.map((x) => encodeOne('int32', x))).toEqual(Array.from(i32));
    const bytes = [0, 255, 256, -1, 3.9, -3.9, 1000, NaN, Infinity];
    const u8 = encodeValues('uint8', bytes);
    expect(u8).toBeInstanceOf(Uint8Array);
    expect(Array.from(u8)).toEqual([0, 255, 0, 255, 3, 253, 232, 0, 0]);
    expect(bytes.map((x) => encodeOne('uint8', x))).toEqual(Array.from(u8));
    const bools = [0, -0, 1, -2, 0.5, NaN, Infinity];
    const b = encodeValues('bool', bools);
    expect(b).toBeInstanceOf(Uint8Array);
    expect(Array.from(b)).toEqual([0, 0, 1, 1, 1, 1, 1]);
    expect(bools.map((x) => encodeOne('bool', x))).toEqual(Array.from(b));
  });

  it('decodeStorage widens every dtype and agrees with decodeOne', () => {
    for (const dtype of DTYPES) {
      const storage = encodeValues(dtype, sample);
      const out = decodeStorage(dtype, storage);
      const want = dtype === 'int32' ? Int32Array : dtype === 'uint8' || dtype === 'bool' ? Uint8Array : Float32Array;
      expect(out, dtype).toBeInstanceOf(want);
      expect(out.length).toBe(sample.length);
      expect(out.buffer).not.toBe(storage.buffer);
      const one = Array.from(storage, (code) => decodeOne(dtype, code));
      expect(Array.from(out), dtype).toEqual(one);
    }
    expect(decodeOne('bool', 7)).toBe(1);
    expect(decodeOne('uint8', 0x1ff)).toBe(0xff);
    expect(decodeOne('int32', 2 ** 31)).toBe(-(2 ** 31));
  });

  it('decodeStorage of all float16 / bfloat16 / fp8 codes matches the formula, NaN bits keep their sign', () => {
    const cases: Array<[DType, Format]> = [
      ['float16', FORMATS[0]],
      ['bfloat16', FORMATS[1]],
      ['float8_e4m3fn', FORMATS[2]],
      ['float8_e5m2', FORMATS[3]],
    ];
    for (const [dtype, f] of cases) {
      const n = 2 ** totalBits(f);
      const storage = allocStorage(dtype, n);
      for (let c = 0; c < n; c++) storage[c] = c;
      const out = decodeStorage(dtype, storage) as Float32Array;
      const bits = new Uint32Array(out.buffer);
      const bad = new Mismatches();
      for (let c = 0; c < n; c++) {
        const want = refDecode(f, c);
        if (Number.isNaN(want)) {
          const negative = (c & signBit(f)) !== 0;
          if (!Number.isNaN(out[c]) || bits[c] >>> 31 !== (negative ? 1 : 0)) bad.add(`${dtype} ${hex(c)}: ${hex(bits[c])}`);
        } else if (!Object.is(out[c], want)) bad.add(`${dtype} ${hex(c)}: got ${out[c]}, want ${want}`);
      }
      bad.check();
    }
  });

  it('decodeStorage rejects storage of the wrong array type', () => {
    expect(() => decodeStorage('float16', new Float32Array(2))).toThrow(DTypeError);
    expect(() => decodeStorage('float32', new Uint16Array(2))).toThrow(/Float32Array/);
    expect(() => decodeStorage('int32', new Uint8Array(2))).toThrow(DTypeError);
  });
});
