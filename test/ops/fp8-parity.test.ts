// FP8 tensors through the operations PyTorch supports for float8_e4m3fn / float8_e5m2, on the CPU backend and on
// WebGPU: creation (with and without saturation), casts both ways (bit-exact against src/core/codecs.ts, itself
// checked here on known values from the OFP8 tables), copies, views that start mid-word (4 codes share a GPU word),
// cat, comparisons, read-back; arithmetic is refused as in PyTorch.
import { describe, expect, it } from 'vitest';
import { backendFor } from '../../src/runtime/registry.js';
import { f16BitsToF32, f32ToBf16Bits, f32ToF16Bits, f32ToFp8Bits, fp8BitsToF32, bf16BitsToF32 } from '../../src/core/codecs.js';
import * as tg from '../../src/index.js';
import { cat, DTypeError, full, Generator, ones, setDefaultDevice, Tensor, tensor, zeros, type DeviceName, type DType } from '../../src/index.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { fp8Value, type Fp8 } from '../helpers/reference.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const FP8: Fp8[] = ['float8_e4m3fn', 'float8_e5m2'];
const fmt = (d: Fp8) => (d === 'float8_e4m3fn' ? 'e4m3fn' : 'e5m2');
const DEVICES: DeviceName[] = gpu.available ? ['cpu', 'webgpu'] : ['cpu'];

/** The stored codes of a tensor (its view, row-major), read without any conversion; float32 as its bit patterns. */
async function codesOf(t: Tensor): Promise<number[]> {
  const raw = await t.storage.backend.read(t.operand());
  return Array.from(raw instanceof Float32Array ? new Uint32Array(raw.buffer, raw.byteOffset, raw.length) : raw);
}

/**
 * float32 bit patterns compared exactly, except that a NaN only has to be a NaN of the same sign: payload bits are
 * not part of any cast's contract (the codec keeps an FP8 NaN's mantissa, the GPU decoder need not; see
 * test/runtime/webgpu/dtype-codecs.test.ts for the same rule).
 */
function expectF32Bits(label: string, got: number[], want: number[]): void {
  const isNaNBits = (b: number) => (b & 0x7fffffff) > 0x7f800000;
  const bad = want
    .map((w, i) =>
      got[i] === w || (isNaNBits(w) && isNaNBits(got[i]) && got[i] >>> 31 === w >>> 31) ? '' : `[${i}] 0x${got[i]?.toString(16)} vs 0x${w.toString(16)}`,
    )
    .filter(Boolean);
  expect(got.length, label).toBe(want.length);
  expect(bad, label).toEqual([]);
}

/** JS values compared as values, -0 apart from 0 and NaN equal to NaN (a JS NaN carries no reliable sign). */
const valueKey = (v: number) => (Number.isNaN(v) ? 'NaN' : Object.is(v, -0) ? '-0' : v);

/** A tensor holding exactly these storage codes. */
function fromCodes(codes: ArrayLike<number>, dtype: DType, shape: number[], device: DeviceName): Tensor {
  const backend = backendFor(device);
  const data =
    dtype === 'float16' || dtype === 'bfloat16'
      ? Uint16Array.from(codes)
      : dtype === 'float32'
        ? new Float32Array(new Uint32Array(Array.from(codes)).buffer)
        : Uint8Array.from(codes);
  return Tensor.fromHandle(backend, backend.upload(dtype, data), dtype, shape);
}

const ALL_CODES = Array.from({ length: 256 }, (_, c) => c);

const f32Bits = (x: number) => new Uint32Array(new Float32Array([x]).buffer)[0];

/** Inputs that exercise every rounding decision of f32 -> fp8: each value, the midpoints, one f32 ulp either side. */
function probeValues(dtype: Fp8): number[] {
  const finite = ALL_CODES.map((c) => fp8Value(c, dtype))
    .filter((v) => Number.isFinite(v) && v >= 0)
    .sort((a, b) => a - b);
  const out: number[] = [];
  const nudge = (x: number, ulps: number) => {
    const u = new Uint32Array(new Float32Array([x]).buffer);
    u[0] += ulps;
    return new Float32Array(u.buffer)[0];
  };
  for (let i = 0; i < finite.length; i++) {
    const v = finite[i];
    out.push(v, -v);
    const next = i + 1 < finite.length ? finite[i + 1] : v + (v - finite[i - 1]); // past the max: the next binade step
    const mid = (v + next) / 2;
    for (const x of [mid, nudge(mid, 1), nudge(mid, -1)]) out.push(x, -x);
  }
  const g = new Generator(3);
  for (let i = 0; i < 200; i++) out.push(Math.fround(g.normal() * 2 ** ((g.nextU32() % 40) - 20)));
  out.push(Infinity, -Infinity, NaN, -NaN, 1e30, -1e30, 1e-30, -1e-30, 2 ** -149, 464, 465, 480, 61440, 61439, 57344 + 4096 - 1);
  return out.map(Math.fround);
}

// ---- the codec reference, pinned to the OFP8 tables --------------------------------------------------------------

describe('codecs (the reference for casts) against the OFP8 definition', () => {
  it.each(FP8)('%s: every code decodes to the value the format defines', (dtype) => {
    for (const c of ALL_CODES) {
      const want = fp8Value(c, dtype);
      const got = fp8BitsToF32(c, fmt(dtype));
      if (Number.isNaN(want)) expect(Number.isNaN(got), `code ${c}`).toBe(true);
      else expect(Object.is(got, want), `code 0x${c.toString(16)}: ${got} vs ${want}`).toBe(true);
    }
  });

  it('known encodings: max finite, overflow, NaN, ties, subnormals, signed zero', () => {
    const e4 = (x: number, sat = false) => f32ToFp8Bits(x, 'e4m3fn', sat);
    const e5 = (x: number, sat = false) => f32ToFp8Bits(x, 'e5m2', sat);
    expect([e4(448), e4(464), e4(465), e4(-500), e4(Infinity), e4(NaN), e4(-0)]).toEqual([0x7e, 0x7e, 0x7f, 0xff, 0x7f, 0x7f, 0x80]);
    expect([e4(465, true), e4(-Infinity, true), e4(NaN, true)]).toEqual([0x7e, 0xfe, 0x7f]);
    expect([e4(2 ** -9), e4(0.5 * 2 ** -9), e4(1.5 * 2 ** -9), e4(2 ** -6), e4(1.0625), e4(1.1875)]).toEqual([0x01, 0x00, 0x02, 0x08, 0x38, 0x3a]);
    expect([e5(57344), e5(61439), e5(61440), e5(Infinity), e5(-Infinity), e5(2 ** -16), e5(1.125)]).toEqual([0x7b, 0x7b, 0x7c, 0x7c, 0xfc, 0x01, 0x3c]);
    expect([e5(61440, true), e5(Infinity, true)]).toEqual([0x7b, 0x7b]);
  });
});

// ---- creation -----------------------------------------------------------------------------------------------------

describe.each(DEVICES)('FP8 creation on %s', (device) => {
  it('tensor([...], {dtype}) rounds like PyTorch: e4m3fn overflow past 464 is NaN, e5m2 overflow is Inf', async () => {
    const e4 = tensor([448, 464, 465, -1000, Infinity, 1.0625, 0.5 * 2 ** -9, -0], { dtype: 'float8_e4m3fn', device });
    expect(e4.dtype).toBe('float8_e4m3fn');
    expect(await codesOf(e4)).toEqual([0x7e, 0x7e, 0x7f, 0xff, 0x7f, 0x38, 0x00, 0x80]);
    expect(Array.from(await e4.toArray())).toEqual([448, 448, NaN, NaN, NaN, 1, 0, -0]);
    const e5 = tensor(
      [
        [57344, 61440],
        [-1e6, 1.125],
      ],
      { dtype: 'float8_e5m2', device },
    );
    expect(e5.shape).toEqual([2, 2]);
    expect(await codesOf(e5)).toEqual([0x7b, 0x7c, 0xfc, 0x3c]);
    expect(await e5.tolist()).toEqual([
      [57344, Infinity],
      [-Infinity, 1],
    ]);
  });

  it('the saturate option clamps to the largest finite value (NaN stays NaN)', async () => {
    const e4 = tensor([465, -1000, Infinity, NaN, 3], { dtype: 'float8_e4m3fn', saturate: true, device });
    expect(await codesOf(e4)).toEqual([0x7e, 0xfe, 0x7e, 0x7f, 0x44]);
    const e5 = tensor([61440, -Infinity, 1e9], { dtype: 'float8_e5m2', saturate: true, device });
    expect(Array.from(await e5.toArray())).toEqual([57344, -57344, 57344]);
    // Aliases: 'fp8' / 'e4m3' / 'e5m2'.
    expect(tensor([1], { dtype: 'fp8', device }).dtype).toBe('float8_e4m3fn');
    expect(tensor([1], { dtype: 'e5m2', device }).dtype).toBe('float8_e5m2');
  });

  it('full / zeros / ones with odd lengths (partial last word)', async () => {
    expect(await codesOf(full([5], 3.3, { dtype: 'float8_e4m3fn', device }))).toEqual(new Array(5).fill(0x45)); // 3.25
    expect(await codesOf(full([3, 3], -1000, { dtype: 'float8_e4m3fn', device }))).toEqual(new Array(9).fill(0xff)); // NaN
    expect(Array.from(await zeros([7], { dtype: 'float8_e5m2', device }).toArray())).toEqual(new Array(7).fill(0));
    expect(Array.from(await ones([2, 3], { dtype: 'float8_e5m2', device }).toArray())).toEqual(new Array(6).fill(1));
  });

  it('rand / randn give FP8 values (same draws on every device)', async () => {
    for (const dtype of FP8) {
      const r = await tg.rand([50], { dtype, device, generator: new Generator(1) }).toArray();
      expect(
        r.every((v) => v >= 0 && v < 1),
        dtype,
      ).toBe(true);
      const n = tg.randn([64], { dtype, device, generator: new Generator(2) });
      const cpu = tg.randn([64], { dtype, generator: new Generator(2) });
      expect(await codesOf(n)).toEqual(await codesOf(cpu));
    }
  });
});

// ---- casts --------------------------------------------------------------------------------------------------------

describe.each(DEVICES)('FP8 casts on %s, bit-exact against the codecs', (device) => {
  it.each(FP8)('%s -> float32 / float16 / bfloat16 for all 256 codes', async (dtype) => {
    const x = fromCodes(ALL_CODES, dtype, [16, 16], device);
    expectF32Bits(
      `${dtype} -> float32`,
      await codesOf(x.to('float32')),
      ALL_CODES.map((c) => f32Bits(fp8BitsToF32(c, fmt(dtype)))),
    );
    expect(await codesOf(x.to('float16'))).toEqual(ALL_CODES.map((c) => f32ToF16Bits(fp8BitsToF32(c, fmt(dtype)))));
    expect(await codesOf(x.to('bfloat16'))).toEqual(ALL_CODES.map((c) => f32ToBf16Bits(fp8BitsToF32(c, fmt(dtype)))));
  });

  it.each(FP8)('float32 -> %s at every value, midpoint and midpoint +- 1 ulp, with and without saturate', async (dtype) => {
    const values = probeValues(dtype);
    const x = tensor(values, { device });
    for (const saturate of [false, true]) {
      const got = await codesOf(x.to(dtype, { saturate }));
      const want = values.map((v) => f32ToFp8Bits(v, fmt(dtype), saturate));
      const bad = want.map((w, i) => (got[i] === w ? '' : `${values[i]}: 0x${got[i].toString(16)} vs 0x${w.toString(16)}`)).filter(Boolean);
      expect(bad, `saturate ${saturate}`).toEqual([]);
    }
  });

  it.each(FP8)('float16 and bfloat16 -> %s for all 65536 codes of each (one rounding, from the exact value)', async (dtype) => {
    const codes = Array.from({ length: 65536 }, (_, c) => c);
    for (const [src, decode] of [
      ['float16', f16BitsToF32],
      ['bfloat16', bf16BitsToF32],
    ] as const) {
      const x = fromCodes(codes, src, [256, 256], device);
      for (const saturate of [false, true]) {
        const got = await codesOf(x.to(dtype, { saturate }));
        let bad = 0;
        let first = '';
        for (const c of codes) {
          const w = f32ToFp8Bits(decode(c), fmt(dtype), saturate);
          if (got[c] !== w) {
            bad++;
            first ||= `${src} 0x${c.toString(16)} (${decode(c)}): 0x${got[c].toString(16)} vs 0x${w.toString(16)}`;
          }
        }
        expect(bad, `${src} saturate ${saturate}: ${first}`).toBe(0);
      }
    }
  });

  it('e4m3fn <-> e5m2 for all codes, with and without saturate', async () => {
    for (const [from, to] of [
      ['float8_e4m3fn', 'float8_e5m2'],
      ['float8_e5m2', 'float8_e4m3fn'],
    ] as const) {
      const x = fromCodes(ALL_CODES, from, [256], device);
      for (const saturate of [false, true]) {
        const want = ALL_CODES.map((c) => f32ToFp8Bits(fp8BitsToF32(c, fmt(from)), fmt(to), saturate));
        expect(await codesOf(x.to(to, { saturate })), `${from} -> ${to} saturate ${saturate}`).toEqual(want);
      }
    }
    // Same-dtype cast with saturate clamps e5m2 infinities; without it, codes are copied (NaN payloads included).
    const e5 = fromCodes([0x7c, 0xfc, 0x7d, 0x01], 'float8_e5m2', [4], device);
    expect(await codesOf(e5.to('float8_e5m2', { saturate: true }))).toEqual([0x7b, 0xfb, 0x7f, 0x01]);
    expect(await codesOf(e5.to('float8_e5m2'))).toEqual([0x7c, 0xfc, 0x7d, 0x01]);
  });

  it('FP8 <-> int32 / uint8 / bool (truncation toward zero, NaN -> 0, saturating to int32, uint8 wraps; bool is x != 0)', async () => {
    for (const dtype of FP8) {
      const x = fromCodes(ALL_CODES, dtype, [256], device);
      const vals = ALL_CODES.map((c) => fp8Value(c, dtype));
      const asInt = vals.map((v) => (Number.isNaN(v) ? 0 : Math.max(-2147483648, Math.min(2147483647, Math.trunc(v))) + 0));
      expect(Array.from(await x.to('int32').toArray()), `${dtype} -> int32`).toEqual(asInt);
      expect(Array.from(await x.to('uint8').toArray()), `${dtype} -> uint8`).toEqual(asInt.map((v) => ((v % 256) + 256) % 256));
      expect(Array.from(await x.to('bool').toArray()), `${dtype} -> bool`).toEqual(vals.map((v) => (v !== 0 ? 1 : 0)));
      const ints = [0, 1, -1, 7, 17, -300, 448, 449, 1000, 100000, -2147483648, 2147483647];
      expect(await codesOf(tensor(ints, { dtype: 'int32', device }).to(dtype)), `int32 -> ${dtype}`).toEqual(ints.map((v) => f32ToFp8Bits(v, fmt(dtype))));
      const bytes = [0, 1, 17, 200, 255];
      expect(await codesOf(tensor(bytes, { dtype: 'uint8', device }).to(dtype)), `uint8 -> ${dtype}`).toEqual(bytes.map((v) => f32ToFp8Bits(v, fmt(dtype))));
      expect(Array.from(await tensor([true, false, true], { device }).to(dtype).toArray())).toEqual([1, 0, 1]);
    }
  });
});

// ---- copies, views, cat ---------------------------------------------------------------------------------------------

/** Codes of an [a, b, c] FP8 tensor: code = a distinct byte per element, NaN codes and -0 among them. */
function codeGrid(n: number, seed: number): number[] {
  const g = new Generator(seed);
  const out = Array.from({ length: n }, () => g.nextU32() & 0xff);
  out[1] = 0x7f;
  out[2] = 0x80;
  out[n - 1] = 0xff;
  return out;
}

/** Row-major codes of a view given by shape/strides/offset over base codes (written out here). */
function viewCodes(base: number[], shape: number[], strides: number[], offset: number): number[] {
  const out: number[] = [];
  const n = shape.reduce((x, y) => x * y, 1);
  for (let e = 0; e < n; e++) {
    let rem = e;
    let off = offset;
    for (let d = shape.length - 1; d >= 0; d--) {
      off += (rem % shape[d]) * strides[d];
      rem = Math.floor(rem / shape[d]);
    }
    out.push(base[off]);
  }
  return out;
}

describe.each(DEVICES)('FP8 copies and views on %s', (device) => {
  const base = codeGrid(5 * 7 * 3, 11); // [5, 7, 3], strides [21, 3, 1]

  it.each(FP8)('clone / contiguous / to(device) keep every code (NaN codes and -0 too) in %s', async (dtype) => {
    const x = fromCodes(base, dtype, [5, 7, 3], device);
    expect(await codesOf(x.clone())).toEqual(base);
    expect(await codesOf(x.contiguous())).toEqual(base);
    expect(await codesOf(x.narrow(1, 1, 5).contiguous())).toEqual(viewCodes(base, [5, 5, 3], [21, 3, 1], 3));
    const other = await x.to(device === 'cpu' && gpu.available ? 'webgpu' : 'cpu');
    expect(await codesOf(other)).toEqual(base);
    expect(await codesOf(await other.to(device))).toEqual(base);
  });

  // [name, view, shape, strides, offset] over the [5, 7, 3] base.
  const views: [string, (t: Tensor) => Tensor, number[], number[], number][] = [
    ['reshape [15, 7]', (t) => t.reshape(15, 7), [15, 7], [7, 1], 0],
    ['view [35, 3]', (t) => t.view([35, 3]), [35, 3], [3, 1], 0],
    ['transpose (0, 2)', (t) => t.transpose(0, 2), [3, 7, 5], [1, 3, 21], 0],
    ['permute (1, 0, 2)', (t) => t.permute(1, 0, 2), [7, 5, 3], [3, 21, 1], 0],
    ['slice dim 1 from 1 step 2', (t) => t.slice(1, 1, 7, 2), [5, 3, 3], [21, 6, 1], 3],
    ['slice dim 2 from 1 (mid-word start)', (t) => t.slice(2, 1), [5, 7, 2], [21, 3, 1], 1],
    ['narrow dim 0 from 1 (offset 21)', (t) => t.narrow(0, 1, 3), [3, 7, 3], [21, 3, 1], 21],
    ['narrow dim 2 from 2 then select dim 0 index 3', (t) => t.narrow(2, 2, 1).select(0, 3), [7, 1], [3, 1], 65],
    ['select dim 1 index 4', (t) => t.select(1, 4), [5, 3], [21, 1], 12],
    ['select dim 2 index -1', (t) => t.select(2, -1), [5, 7], [21, 3], 2],
    ['flat slice from 5 (mid-word), 33 long', (t) => t.reshape(105).narrow(0, 5, 33), [33], [1], 5],
    ['T of a 2-D reshape', (t) => t.reshape(21, 5).T, [5, 21], [1, 5], 0],
  ];

  it.each(FP8)('views (reshape/view/transpose/permute/slice/narrow/select) read back exactly in %s', async (dtype) => {
    const x = fromCodes(base, dtype, [5, 7, 3], device);
    for (const [name, make, shape, strides, offset] of views) {
      const v = make(x);
      const want = viewCodes(base, shape, strides, offset);
      expect(v.shape, name).toEqual(shape);
      expect(v.dtype, name).toBe(dtype);
      expect(await codesOf(v), `${name}: read`).toEqual(want);
      expect(await codesOf(v.contiguous()), `${name}: contiguous`).toEqual(want);
      expect(Array.from(await v.toArray(), valueKey), `${name}: toArray`).toEqual(want.map((c) => valueKey(fp8Value(c, dtype))));
      expectF32Bits(
        `${name}: to float32`,
        await codesOf(v.to('float32')),
        want.map((c) => f32Bits(fp8BitsToF32(c, fmt(dtype)))),
      );
    }
    expect(() => x.transpose(0, 2).view(105)).toThrow(tg.ShapeError);
  });

  it('cat of odd sizes and of mid-word views (1-D, dim 0 and dim 1 of 2-D)', async () => {
    const a = codeGrid(3, 1);
    const b = codeGrid(5, 2);
    const c = [0x42];
    const t = (codes: number[], shape: number[]) => fromCodes(codes, 'float8_e4m3fn', shape, device);
    expect(await codesOf(cat([t(a, [3]), t(b, [5]), t(c, [1])]))).toEqual([...a, ...b, ...c]);
    // Views starting mid-word: b[1:4] and a[2:3].
    expect(await codesOf(cat([t(b, [5]).narrow(0, 1, 3), t(a, [3]).narrow(0, 2, 1), t(c, [1])]))).toEqual([...b.slice(1, 4), a[2], c[0]]);
    // 2-D: [3, 3] and [3, 2] along dim 1 (rows interleave), [1, 5] and [2, 5] along dim 0.
    const m33 = codeGrid(9, 3);
    const m32 = codeGrid(6, 4);
    const rows = [0, 1, 2].flatMap((r) => [...m33.slice(3 * r, 3 * r + 3), ...m32.slice(2 * r, 2 * r + 2)]);
    expect(await codesOf(cat([t(m33, [3, 3]), t(m32, [3, 2])], 1))).toEqual(rows);
    const m15 = codeGrid(5, 5);
    const m25 = codeGrid(10, 6);
    expect(await codesOf(cat([t(m15, [1, 5]), t(m25, [2, 5])], 0))).toEqual([...m15, ...m25]);
    // Transposed input: [3, 3].T next to [3, 2] along dim 1.
    const tr = [0, 1, 2].flatMap((r) => [m33[r], m33[3 + r], m33[6 + r], ...m32.slice(2 * r, 2 * r + 2)]);
    expect(await codesOf(cat([t(m33, [3, 3]).T, t(m32, [3, 2])], -1))).toEqual(tr);
    // e5m2 keeps its own codes (Inf, subnormal, NaN); mixing FP8 formats is refused. (cat converts through float32,
    // so a NaN with another payload, e.g. 0xfd, comes out as the canonical 0xff on both devices.)
    expect(await codesOf(cat([fromCodes([0x7c, 0x01], 'float8_e5m2', [2], device), fromCodes([0xff, 0x80], 'float8_e5m2', [2], device)]))).toEqual([
      0x7c, 0x01, 0xff, 0x80,
    ]);
    expect(() => cat([t(a, [3]), fromCodes([1], 'float8_e5m2', [1], device)])).toThrow(DTypeError);
  });
});

// ---- comparisons, read-back, refused arithmetic ---------------------------------------------------------------------

describe.each(DEVICES)('FP8 comparisons and read-back on %s', (device) => {
  const cmp: Record<string, (x: number, y: number) => boolean> = {
    eq: (x, y) => x === y,
    ne: (x, y) => x !== y,
    lt: (x, y) => x < y,
    le: (x, y) => x <= y,
    gt: (x, y) => x > y,
    ge: (x, y) => x >= y,
  };

  it.each(FP8)('eq/ne/lt/le/gt/ge on %s give bool, NaN unordered, -0 == 0', async (dtype) => {
    const g = new Generator(21);
    const ac = [...ALL_CODES];
    const bc = ALL_CODES.map((c, i) => (i % 3 === 0 ? c : i % 3 === 1 ? c ^ 0x80 : g.nextU32() & 0xff));
    bc[0] = 0x80; // +0 vs -0
    const a = fromCodes(ac, dtype, [16, 16], device);
    const b = fromCodes(bc, dtype, [16, 16], device);
    const av = ac.map((c) => fp8Value(c, dtype));
    const bv = bc.map((c) => fp8Value(c, dtype));
    for (const [op, f] of Object.entries(cmp)) {
      const r = (a as unknown as Record<string, (o: Tensor | number) => Tensor>)[op](b);
      expect(r.dtype, op).toBe('bool');
      expect(r.shape).toEqual([16, 16]);
      expect(Array.from(await r.toArray()), `${op} tensor`).toEqual(av.map((x, i) => (f(x, bv[i]) ? 1 : 0)));
      const s = (a as unknown as Record<string, (o: Tensor | number) => Tensor>)[op](1.5);
      expect(Array.from(await s.toArray()), `${op} 1.5`).toEqual(av.map((x) => (f(x, 1.5) ? 1 : 0)));
    }
    // Against a float32 tensor, broadcast along rows.
    const row = tensor([0.5, -2, 448, NaN], { device });
    const col = fromCodes([0x38, 0xff, 0x00, 0x7e], dtype, [4, 1], device);
    const cv = [0x38, 0xff, 0x00, 0x7e].map((c) => fp8Value(c, dtype));
    const want = cv.flatMap((x) => [0.5, -2, 448, NaN].map((y) => (x < y ? 1 : 0)));
    expect(Array.from(await col.lt(row).toArray())).toEqual(want);
    // A view starting mid-word against a contiguous tensor.
    const mid = a.reshape(256).narrow(0, 3, 5);
    expect(Array.from(await mid.ge(b.reshape(256).narrow(0, 0, 5)).toArray())).toEqual([0, 1, 2, 3, 4].map((i) => (av[3 + i] >= bv[i] ? 1 : 0)));
  });

  it('toArray gives float32 values, tolist nested numbers (and booleans for comparisons), item one value', async () => {
    const x = tensor(
      [
        [1.5, -0.25, 448],
        [NaN, -0, 0.001953125],
      ],
      { dtype: 'float8_e4m3fn', device },
    );
    const arr = await x.toArray();
    expect(arr).toBeInstanceOf(Float32Array);
    expect(Array.from(arr)).toEqual([1.5, -0.25, 448, NaN, -0, 0.001953125]);
    expect(await x.tolist()).toEqual([
      [1.5, -0.25, 448],
      [NaN, -0, 0.001953125],
    ]);
    expect(await x.T.tolist()).toEqual([
      [1.5, NaN],
      [-0.25, -0],
      [448, 0.001953125],
    ]);
    expect(await x.gt(0).tolist()).toEqual([
      [true, false, true],
      [false, false, true],
    ]);
    expect(await x.select(0, 0).select(0, 2).item()).toBe(448);
    const e5 = tensor([Infinity, -57344, 2 ** -16], { dtype: 'float8_e5m2', device });
    expect(await e5.tolist()).toEqual([Infinity, -57344, 2 ** -16]);
  });

  it.each(FP8)('arithmetic on %s throws DTypeError naming the dtype (cast first, as PyTorch requires)', (dtype) => {
    const x = tensor([1, 2, 3], { dtype, device });
    const y = tensor([1, 2, 3], { device });
    const re = new RegExp(dtype);
    const ops: [string, () => unknown][] = [
      ['add', () => x.add(y)],
      ['add scalar', () => x.add(1)],
      ['scalar + x', () => tg.add(1, x)],
      ['sub', () => y.sub(x)],
      ['mul', () => x.mul(x)],
      ['div', () => x.div(2)],
      ['maximum', () => x.maximum(y)],
      ['minimum', () => tg.minimum(y, x)],
      ['neg', () => x.neg()],
      ['abs', () => x.abs()],
      ['exp', () => x.exp()],
      ['relu', () => x.relu()],
      ['silu', () => x.silu()],
      ['sum', () => x.sum()],
      ['mean', () => x.mean()],
      ['matmul', () => x.reshape(1, 3).matmul(x.reshape(3, 1))],
    ];
    for (const [name, f] of ops) {
      expect(f, name).toThrow(DTypeError);
      expect(f, name).toThrow(re);
    }
  });
});
