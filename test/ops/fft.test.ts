// torch.fft's fft / ifft / rfft / irfft on CPU (float64, rounded once) and WebGPU (float32) against an independent
// float64 DFT written here straight from the definition (O(n^2); every angle is 2 pi ((j k) mod n) / n, an exact
// integer index into a cos/sin table, so the reference stays at float64 accuracy for any n). Lengths cover the
// radix-4/2/3/5 Stockham sizes, Bluestein (401, 997, 2049, 4099), the one-workgroup limit (2048) and the
// multi-dispatch global path (2049, 3000, 4096, 4099), with batch dims. Also: round trips, the n / dim / norm
// options, Parseval, empty batches, NaN/Inf isolation per row, float16/bfloat16 inputs, strided views, the hermitian
// input rules of irfft, dispatch counts (one per transform up to 2048; the global path's load + passes + store) and
// typed errors.
//
// Tolerances. Inputs are standard normals, so output values are ~sqrt(n) * s (s: the transform's scale, 1 or 1/n)
// and a float32 FFT's absolute error grows like eps32 * sqrt(n) * s (times a slowly growing log factor). Bounds are
// atol = C * eps32 * sqrt(n) * s (rtol 0), with the worst C measured over every length and transform here
// (FFT_REPORT=1 prints it):
// - CPU: measured C <= 2.3 (irfft; fft/ifft <= 2.0). It is the float64 result rounded once to float32, so the error
//   is at most 2^-24 * max |value|, max |value| ~ 4.5 sqrt(n) s (irfft: sqrt(2) more) over these samples: C <~ 3.5;
//   bound C = 5.
// - WebGPU: measured C <= 11.6 (irfft, Bluestein 4099; fft/ifft <= 9.4; Stockham sizes <= ~5); bound C = 32, about
//   2.8x the worst seen.
// A real bug is orders of magnitude beyond either: one wrong twiddle or a misplaced output gives errors ~ the
// values themselves, C ~ 1 / eps32 ~ 1e7; even twiddles rounded to float16 would give C ~ 1e4.
// Round trips (ifft(fft(x)), irfft(rfft(x))) must return x within 1e-5 absolute (|x| <~ 5); measured <= ~1e-6.
import { afterAll, describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { DTypeError, setDefaultDevice, ShapeError, type Tensor } from '../../src/index.js';
import { nextSmooth, stockhamRadices } from '../../src/runtime/fft-plan.js';
import { expectClose, randomTensor, type Tolerance } from '../helpers/compare.js';
import { dispatchesOf, setupWebGpu } from '../helpers/webgpu.js';
import { dft, runOn, type Dev } from '../helpers/dft.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

type Kind = 'fft' | 'ifft' | 'rfft' | 'irfft';
const DEVICES: Dev[] = gpu.available ? ['cpu', 'webgpu'] : ['cpu'];
const SLOW = 120_000;

const EPS32 = 2 ** -23;
const C: Record<Dev, number> = { cpu: 5, webgpu: 32 };
const OPS: Record<Kind, typeof tg.fft> = { fft: tg.fft, ifft: tg.ifft, rfft: tg.rfft, irfft: tg.irfft };

const SHORT = [1, 2, 3, 5, 8, 16, 64, 400, 480, 512, 401, 997, 1024, 2048];
const LONG = [2049, 3000, 4096, 4099];
const LENGTHS = [...SHORT, ...LONG];

// ---- the float64 reference ---------------------------------------------------------------------------------------

/** The default (norm 'backward') scale of a transform of length n. */
const backwardScale = (kind: Kind, n: number) => (kind === 'ifft' || kind === 'irfft' ? 1 / n : 1);

/**
 * The reference of `kind` over rows of row-major x: complex kinds read [rows, length, 2], rfft reads [rows, length].
 * Returns [rows, n, 2] (fft, ifft), [rows, n/2 + 1, 2] (rfft) or [rows, n] (irfft). irfft builds the full spectrum
 * by hermitian symmetry from bins 0..n/2 (missing bins zero), with the imaginary parts of bin 0 and (n even) of
 * bin n/2 dropped, and takes the real part of its inverse DFT.
 */
function reference(kind: Kind, x: ArrayLike<number>, rows: number, length: number, n: number, scale = backwardScale(kind, n)): Float64Array {
  const bins = kind === 'rfft' ? Math.floor(n / 2) + 1 : n;
  const width = kind === 'irfft' ? 1 : 2;
  const out = new Float64Array(rows * bins * width);
  for (let r = 0; r < rows; r++) {
    let re: Float64Array;
    let im: Float64Array;
    if (kind === 'rfft') {
      re = Float64Array.from({ length }, (_, j) => x[r * length + j]);
      im = new Float64Array(length);
    } else if (kind === 'irfft') {
      re = new Float64Array(n);
      im = new Float64Array(n);
      for (let k = 0; k < n; k++) {
        const q = k <= n / 2 ? k : n - k;
        if (q >= length) continue;
        const dropImag = q === 0 || 2 * q === n;
        re[k] = x[2 * (r * length + q)];
        im[k] = dropImag ? 0 : (k === q ? 1 : -1) * x[2 * (r * length + q) + 1];
      }
    } else {
      re = Float64Array.from({ length }, (_, j) => x[2 * (r * length + j)]);
      im = Float64Array.from({ length }, (_, j) => x[2 * (r * length + j) + 1]);
    }
    const [yr, yi] = dft(re, im, n, kind === 'ifft' || kind === 'irfft', scale, bins);
    for (let k = 0; k < bins; k++) {
      if (width === 1) out[r * bins + k] = yr[k];
      else {
        out[2 * (r * bins + k)] = yr[k];
        out[2 * (r * bins + k) + 1] = yi[k];
      }
    }
  }
  return out;
}

// ---- running and checking ----------------------------------------------------------------------------------------

const bound = (dev: Dev, n: number, scale: number): Tolerance => ({ atol: C[dev] * EPS32 * Math.sqrt(n) * scale, rtol: 0 });

/** Worst measured C (max |got - want| / (eps32 sqrt(n) s)) per transform and device, printed with FFT_REPORT=1. */
const worst = new Map<string, { c: number; n: number }>();
afterAll(() => {
  if (process.env.FFT_REPORT) for (const [k, v] of [...worst].sort()) console.log(`fft error ${k}: C = ${v.c.toFixed(3)} (n = ${v.n})`);
});

/** Compares got with want within the device's bound for a transform of length n and scale s (and records C). */
function check(got: ArrayLike<number>, want: ArrayLike<number>, dev: Dev, n: number, scale: number, label: string): void {
  const unit = EPS32 * Math.sqrt(n) * scale;
  let m = 0;
  for (let i = 0; i < Math.min(got.length, want.length); i++) m = Math.max(m, Math.abs(got[i] - want[i]));
  const key = `${label.split(' ')[0]}/${dev}`;
  if ((worst.get(key)?.c ?? -1) < m / unit) worst.set(key, { c: m / unit, n });
  expectClose(got, want, bound(dev, n, scale), `${label} on ${dev}`);
}

const maxAbsDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
};

// ---- the sweep -----------------------------------------------------------------------------------------------------

/** The input shape and options each kind is swept with at length n (rows: batch dims, flattened). */
function sweepCase(kind: Kind, n: number): { shape: number[]; rows: number; length: number; options: tg.FftOptions } {
  if (kind === 'fft' || kind === 'ifft') return { shape: [3, n, 2], rows: 3, length: n, options: {} };
  if (kind === 'rfft') return { shape: [2, 2, n], rows: 4, length: n, options: {} };
  const length = Math.floor(n / 2) + 1;
  return { shape: [2, 2, length, 2], rows: 4, length, options: { n } };
}

describe(`fft / ifft / rfft / irfft against a float64 DFT ${gpu.skipReason}`, () => {
  it.each(LENGTHS)(
    'n = %i: every transform on every device, and WebGPU vs CPU',
    async (n) => {
      for (const kind of ['fft', 'ifft', 'rfft', 'irfft'] as const) {
        const c = sweepCase(kind, n);
        const x = randomTensor(c.shape);
        const want = reference(kind, await x.toArray(), c.rows, c.length, n);
        const outShape = kind === 'irfft' ? [...c.shape.slice(0, -2), n] : kind === 'rfft' ? [...c.shape.slice(0, -1), Math.floor(n / 2) + 1, 2] : c.shape;
        const got: Partial<Record<Dev, Float32Array>> = {};
        for (const dev of DEVICES) {
          const r = await runOn(dev, [x], (t) => OPS[kind](t, c.options));
          expect(r.shape, `${kind} ${n} ${dev}`).toEqual(outShape);
          check(r.values, want, dev, n, backwardScale(kind, n), `${kind} n=${n}`);
          got[dev] = r.values;
        }
        if (got.webgpu) expectClose(got.webgpu, got.cpu!, bound('webgpu', n, backwardScale(kind, n)), `${kind} n=${n} WebGPU vs CPU`);
        x.dispose();
      }
    },
    SLOW,
  );

  it.each(LENGTHS)(
    'n = %i: ifft(fft(x)) and irfft(rfft(x), { n }) return x within 1e-5',
    async (n) => {
      const z = randomTensor([3, n, 2]);
      const x = randomTensor([2, 2, n]);
      const [zv, xv] = [await z.toArray(), await x.toArray()];
      for (const dev of DEVICES) {
        const zz = await runOn(dev, [z], (t) => {
          const f = tg.fft(t);
          const y = tg.ifft(f);
          f.dispose();
          return y;
        });
        expectClose(zz.values, zv, { atol: 1e-5, rtol: 0 }, `ifft(fft) n=${n} ${dev}`);
        const defaults = n % 2 === 0 ? [{ n }, {}] : [{ n }];
        for (const o of defaults) {
          const xx = await runOn(dev, [x], (t) => {
            const f = tg.rfft(t);
            const y = tg.irfft(f, o);
            f.dispose();
            return y;
          });
          expect(xx.shape).toEqual([2, 2, n]);
          expectClose(xx.values, xv, { atol: 1e-5, rtol: 0 }, `irfft(rfft, ${JSON.stringify(o)}) n=${n} ${dev}`);
        }
      }
      z.dispose();
      x.dispose();
    },
    SLOW,
  );
});

// ---- options -------------------------------------------------------------------------------------------------------

/**
 * Each case transformed along `dim` equals the transform of the tensor with dim swapped last (made contiguous),
 * swapped back. The output swaps the same dims: rfft's output has a trailing 2 more, irfft's one less.
 */
async function checkDims(cases: { kind: Kind; shape: number[]; dim: number; n?: number; out: number[] }[]): Promise<void> {
  for (const c of cases) {
    const x = randomTensor(c.shape);
    const complexIn = c.kind !== 'rfft';
    const rank = complexIn ? c.shape.length - 1 : c.shape.length; // of the signal, without a trailing 2
    const dim = c.dim < 0 ? c.dim + rank : c.dim;
    const order = [...Array(rank).keys()];
    [order[dim], order[rank - 1]] = [order[rank - 1], order[dim]];
    const inOrder = complexIn ? [...order, rank] : order;
    const outOrder = c.kind === 'irfft' ? order : [...order, rank];
    const o = c.n === undefined ? {} : { n: c.n };
    for (const dev of DEVICES) {
      const a = await runOn(dev, [x], (t) => OPS[c.kind](t, { ...o, dim: c.dim }));
      const b = await runOn(dev, [x], (t) => {
        const moved = t.permute(inOrder).contiguous();
        const y = OPS[c.kind](moved, o);
        moved.dispose();
        return y.permute(outOrder);
      });
      expect(a.shape, `${c.kind} dim ${c.dim}`).toEqual(c.out);
      expect(b.shape, `${c.kind} dim ${c.dim} (permuted)`).toEqual(c.out);
      const n = c.n ?? (c.kind === 'irfft' ? 2 * (c.shape[dim] - 1) : c.shape[dim]);
      expectClose(a.values, b.values, bound(dev, n, backwardScale(c.kind, n)), `${c.kind} dim ${c.dim} ${dev}`);
    }
    x.dispose();
  }
}

describe(`fft options: n, dim, norm ${gpu.skipReason}`, () => {
  it(
    'n zero-pads and truncates (fft, ifft, rfft), and sets the output length of irfft (odd, longer, shorter)',
    async () => {
      const z = randomTensor([2, 10, 2]);
      const x = randomTensor([3, 10]);
      const h = randomTensor([3, 9, 2]);
      const [zv, xv, hv] = [await z.toArray(), await x.toArray(), await h.toArray()];
      const cases: { kind: Kind; input: Tensor; values: ArrayLike<number>; rows: number; length: number; n?: number; shape: number[] }[] = [
        { kind: 'fft', input: z, values: zv, rows: 2, length: 10, n: 16, shape: [2, 16, 2] },
        { kind: 'fft', input: z, values: zv, rows: 2, length: 10, n: 6, shape: [2, 6, 2] },
        { kind: 'fft', input: z, values: zv, rows: 2, length: 10, n: 13, shape: [2, 13, 2] },
        { kind: 'ifft', input: z, values: zv, rows: 2, length: 10, n: 25, shape: [2, 25, 2] },
        { kind: 'ifft', input: z, values: zv, rows: 2, length: 10, n: 7, shape: [2, 7, 2] },
        { kind: 'rfft', input: x, values: xv, rows: 3, length: 10, n: 16, shape: [3, 9, 2] },
        { kind: 'rfft', input: x, values: xv, rows: 3, length: 10, n: 7, shape: [3, 4, 2] },
        { kind: 'irfft', input: h, values: hv, rows: 3, length: 9, shape: [3, 16] },
        { kind: 'irfft', input: h, values: hv, rows: 3, length: 9, n: 17, shape: [3, 17] },
        { kind: 'irfft', input: h, values: hv, rows: 3, length: 9, n: 10, shape: [3, 10] },
        { kind: 'irfft', input: h, values: hv, rows: 3, length: 9, n: 30, shape: [3, 30] },
      ];
      for (const c of cases) {
        const n = c.n ?? 2 * (c.length - 1);
        const want = reference(c.kind, c.values, c.rows, c.length, n);
        for (const dev of DEVICES) {
          const r = await runOn(dev, [c.input], (t) => OPS[c.kind](t, c.n === undefined ? {} : { n: c.n }));
          expect(r.shape, `${c.kind} n=${c.n}`).toEqual(c.shape);
          check(r.values, want, dev, n, backwardScale(c.kind, n), `${c.kind} n=${c.n} (input ${c.length})`);
        }
      }
      // Zero-padding by n is the transform of the explicitly padded signal.
      const padded = tg.pad(z, [0, 0, 0, 6]);
      for (const dev of DEVICES) {
        const a = await runOn(dev, [z], (t) => tg.fft(t, { n: 16 }));
        const b = await runOn(dev, [padded], (t) => tg.fft(t));
        expectClose(a.values, b.values, bound(dev, 16, 1), `fft n=16 vs padded ${dev}`);
      }
      [z, x, h, padded].forEach((t) => t.dispose());
    },
    SLOW,
  );

  it(
    'dim transforms a non-last dim: the result equals transforming the permuted tensor and permuting back',
    async () => {
      // [a, b, c(, 2)] with dim 0 or 1 swapped last, transformed contiguously, swapped back.
      await checkDims([
        { kind: 'fft', shape: [6, 3, 4, 2], dim: 0, out: [6, 3, 4, 2] },
        { kind: 'fft', shape: [3, 7, 4, 2], dim: -2, out: [3, 7, 4, 2] },
        { kind: 'ifft', shape: [3, 5, 4, 2], dim: 1, n: 8, out: [3, 8, 4, 2] },
      ]);
    },
    SLOW,
  );

  it(
    'dim on rfft / irfft (real <-> complex: the result has one dim more / less than the input)',
    async () => {
      await checkDims([
        { kind: 'rfft', shape: [9, 4], dim: 0, out: [5, 4, 2] },
        { kind: 'rfft', shape: [2, 10, 3], dim: 1, n: 12, out: [2, 7, 3, 2] },
        { kind: 'irfft', shape: [5, 3, 2], dim: 0, out: [8, 3] },
        { kind: 'irfft', shape: [2, 6, 3, 2], dim: -2, n: 11, out: [2, 11, 3] },
      ]);
    },
    SLOW,
  );

  it(
    "norm 'forward' and 'ortho' scale the 'backward' results by 1/n, 1/sqrt(n) (inverses: n, sqrt(n)); ortho keeps Parseval",
    async () => {
      for (const n of [12, 401]) {
        const z = randomTensor([2, n, 2]);
        const x = randomTensor([2, n]);
        const h = randomTensor([2, Math.floor(n / 2) + 1, 2]);
        const inputs: Record<Kind, Tensor> = { fft: z, ifft: z, rfft: x, irfft: h };
        for (const dev of DEVICES) {
          for (const kind of ['fft', 'ifft', 'rfft', 'irfft'] as const) {
            const inverse = kind === 'ifft' || kind === 'irfft';
            const base = await runOn(dev, [inputs[kind]], (t) => OPS[kind](t, { n }));
            const s0 = backwardScale(kind, n);
            for (const [norm, factor] of [
              ['backward', 1],
              ['forward', inverse ? n : 1 / n],
              ['ortho', inverse ? Math.sqrt(n) : 1 / Math.sqrt(n)],
            ] as const) {
              const r = await runOn(dev, [inputs[kind]], (t) => OPS[kind](t, { n, norm }));
              const want = Array.from(base.values, (v) => v * factor);
              expectClose(r.values, want, bound(dev, n, s0 * factor), `${kind} norm ${norm} n=${n} ${dev}`);
            }
          }
          // Parseval: sum |X|^2 = sum |z|^2 with ortho; and ortho inverts ortho.
          const zv = Float32Array.from(await z.toArray());
          const energy = zv.reduce((a, v) => a + v * v, 0);
          const f = await runOn(dev, [z], (t) => tg.fft(t, { norm: 'ortho' }));
          const fe = f.values.reduce((a, v) => a + v * v, 0);
          expect(Math.abs(fe - energy) / energy, `Parseval n=${n} ${dev}`).toBeLessThan(1e-5);
          const back = await runOn(dev, [z], (t) => {
            const y = tg.fft(t, { norm: 'ortho' });
            const w = tg.ifft(y, { norm: 'ortho' });
            y.dispose();
            return w;
          });
          expectClose(back.values, zv, { atol: 1e-5, rtol: 0 }, `ortho round trip n=${n} ${dev}`);
        }
        [z, x, h].forEach((t) => t.dispose());
      }
    },
    SLOW,
  );
});

// ---- edge cases ----------------------------------------------------------------------------------------------------

describe(`fft edge cases ${gpu.skipReason}`, () => {
  it('an empty batch gives an empty result of the right shape', async () => {
    const cases: { kind: Kind; shape: number[]; out: number[] }[] = [
      { kind: 'fft', shape: [0, 8, 2], out: [0, 8, 2] },
      { kind: 'ifft', shape: [2, 0, 5, 2], out: [2, 0, 5, 2] },
      { kind: 'rfft', shape: [0, 8], out: [0, 5, 2] },
      { kind: 'irfft', shape: [3, 0, 5, 2], out: [3, 0, 8] },
      { kind: 'fft', shape: [0, 4096, 2], out: [0, 4096, 2] },
    ];
    for (const c of cases) {
      const x = tg.zeros(c.shape);
      for (const dev of DEVICES) {
        const r = await runOn(dev, [x], (t) => OPS[c.kind](t));
        expect(r.shape, `${c.kind} ${c.shape} ${dev}`).toEqual(c.out);
        expect(r.values.length).toBe(0);
      }
      x.dispose();
    }
  });

  it(
    'NaN or Inf in one row poisons only that row: the other rows stay finite and correct',
    async () => {
      for (const n of [64, 401, 4096]) {
        for (const kind of ['fft', 'rfft', 'irfft'] as const) {
          const c = sweepCase(kind, n);
          const values = Array.from(await randomTensor(c.shape).toArray());
          const perRow = values.length / c.rows;
          values[1 * perRow + 3] = NaN;
          values[2 * perRow + 0] = Infinity;
          const x = tg.tensor(values, { shape: c.shape });
          const want = reference(kind, values, c.rows, c.length, n);
          const outPerRow = want.length / c.rows;
          for (const dev of DEVICES) {
            const r = await runOn(dev, [x], (t) => OPS[kind](t, c.options));
            for (const row of [0, 3]) {
              const got = r.values.subarray(row * outPerRow, (row + 1) * outPerRow);
              expect(got.every(Number.isFinite), `${kind} n=${n} row ${row} finite on ${dev}`).toBe(true);
              check(
                got,
                want.subarray(row * outPerRow, (row + 1) * outPerRow),
                dev,
                n,
                backwardScale(kind, n),
                `${kind} n=${n} row ${row} beside NaN/Inf rows`,
              );
            }
            for (const row of [1, 2]) {
              const got = r.values.subarray(row * outPerRow, (row + 1) * outPerRow);
              expect(
                got.some((v) => !Number.isFinite(v)),
                `${kind} n=${n} row ${row} not finite on ${dev}`,
              ).toBe(true);
            }
          }
          x.dispose();
        }
      }
    },
    SLOW,
  );

  it(
    'float16 and bfloat16 inputs give the float32 transform of the rounded values (odd lengths: half-filled words)',
    async () => {
      for (const dtype of ['float16', 'bfloat16'] as const) {
        for (const n of [7, 401, 4096]) {
          // (Bluestein 401 for the real input only: every kind and dtype is a pipeline to compile.)
          for (const kind of n === 401 ? (['rfft'] as const) : (['fft', 'ifft', 'rfft', 'irfft'] as const)) {
            const c = sweepCase(kind, n);
            const narrow = randomTensor(c.shape, dtype);
            const wide = tg.cast(narrow, 'float32');
            const want = reference(kind, await wide.toArray(), c.rows, c.length, n);
            for (const dev of DEVICES) {
              const a = await runOn(dev, [narrow], (t) => OPS[kind](t, c.options));
              const b = await runOn(dev, [wide], (t) => OPS[kind](t, c.options));
              // The same float32 values go through the same transform: identical up to float32 noise.
              expectClose(a.values, b.values, bound(dev, n, backwardScale(kind, n)), `${kind} ${dtype} n=${n} vs float32 on ${dev}`);
              check(a.values, want, dev, n, backwardScale(kind, n), `${kind} ${dtype} n=${n}`);
            }
            narrow.dispose();
            wide.dispose();
          }
        }
      }
    },
    SLOW,
  );

  it(
    'strided and transposed views are read as their logical values',
    async () => {
      for (const n of [16, 401, 4096]) {
        const L = Math.floor(n / 2) + 1;
        const views: { label: string; kind: Kind; stored: number[]; view: (t: Tensor) => Tensor; n?: number }[] = [
          { label: 'rows transposed [n, 3, 2] -> [3, n, 2]', kind: 'fft', stored: [n, 3, 2], view: (t) => t.permute(1, 0, 2) },
          { label: 'complex pair strided [3, 2, n] -> [3, n, 2]', kind: 'ifft', stored: [3, 2, n], view: (t) => t.permute(0, 2, 1) },
          { label: 'batch dims that do not merge [3, 2, n, 2] -> [2, 3, n, 2]', kind: 'fft', stored: [3, 2, n, 2], view: (t) => t.permute(1, 0, 2, 3) },
          { label: 'real transposed [n, 4] -> [4, n]', kind: 'rfft', stored: [n, 4], view: (t) => t.transpose(0, 1) },
          { label: 'real step 2 at an odd offset', kind: 'rfft', stored: [3, 2 * n + 1], view: (t) => t.slice(1, 1, 2 * n + 1, 2) },
          { label: 'hermitian transposed [L, 3, 2] -> [3, L, 2]', kind: 'irfft', stored: [L, 3, 2], view: (t) => t.permute(1, 0, 2), n },
        ];
        for (const v of views) {
          const x = randomTensor(v.stored);
          const logical = v.view(x).contiguous();
          const shape = logical.shape;
          const complex = v.kind !== 'rfft';
          const length = shape[shape.length - (complex ? 2 : 1)];
          const rows = shape.slice(0, complex ? -2 : -1).reduce((a, b) => a * b, 1);
          const want = reference(v.kind, await logical.toArray(), rows, length, n);
          const o = v.n === undefined ? {} : { n: v.n };
          for (const dev of DEVICES) {
            const r = await runOn(dev, [x], (t) => OPS[v.kind](v.view(t), o));
            check(r.values, want, dev, n, backwardScale(v.kind, n), `${v.kind} ${v.label} n=${n}`);
          }
          x.dispose();
          logical.dispose();
        }
      }
    },
    SLOW,
  );

  it(
    'irfft ignores the imaginary parts of bin 0 and the Nyquist bin (even n), and bins past n/2; odd n uses its last bin whole',
    async () => {
      for (const n of [16, 400, 401, 4096]) {
        const L = Math.floor(n / 2) + 1;
        const base = Array.from(await randomTensor([3, L + 2, 2]).toArray());
        // Zero the parts that must be ignored, then perturb them: the results must agree.
        const clean = base.slice();
        for (let r = 0; r < 3; r++) {
          const row = r * (L + 2) * 2;
          clean[row + 1] = 0;
          if (n % 2 === 0) clean[row + 2 * (L - 1) + 1] = 0;
          for (let k = L; k < L + 2; k++) clean[row + 2 * k] = clean[row + 2 * k + 1] = 0;
        }
        const dirty = tg.tensor(base, { shape: [3, L + 2, 2] });
        const tidy = tg.tensor(clean, { shape: [3, L + 2, 2] });
        const want = reference('irfft', base, 3, L + 2, n);
        for (const dev of DEVICES) {
          const a = await runOn(dev, [dirty], (t) => tg.irfft(t, { n }));
          const b = await runOn(dev, [tidy], (t) => tg.irfft(t, { n }));
          expect(a.shape).toEqual([3, n]);
          check(a.values, want, dev, n, 1 / n, `irfft n=${n} with imag in bin 0 / Nyquist`);
          expectClose(a.values, b.values, bound(dev, n, 1 / n), `irfft n=${n} ignored parts on ${dev}`);
          if (n % 2 === 1) {
            // The last bin of an odd n is not a Nyquist bin: its imaginary part counts.
            const moved = clean.slice();
            for (let r = 0; r < 3; r++) moved[r * (L + 2) * 2 + 2 * (L - 1) + 1] += 1;
            const m = tg.tensor(moved, { shape: [3, L + 2, 2] });
            const c = await runOn(dev, [m], (t) => tg.irfft(t, { n }));
            check(c.values, reference('irfft', moved, 3, L + 2, n), dev, n, 1 / n, `irfft n=${n} last-bin imag`);
            expect(maxAbsDiff(c.values, b.values)).toBeGreaterThan(1 / n);
            m.dispose();
          }
        }
        dirty.dispose();
        tidy.dispose();
      }
    },
    SLOW,
  );
});

// ---- dispatches and errors ------------------------------------------------------------------------------------------

/** Dispatches the global path issues for length n: load, the passes, store; Bluestein: two transforms + the product. */
function globalDispatches(n: number): number {
  const radices = stockhamRadices(n);
  if (radices) return 2 + radices.length;
  return 3 + 2 * stockhamRadices(nextSmooth(2 * n - 1))!.length;
}

describe.skipIf(!gpu.available)(`fft dispatch counts ${gpu.skipReason}`, () => {
  it(
    'one dispatch per transform up to n = 2048 (Bluestein 401 and 997 included); the global path is load + passes + store',
    async () => {
      for (const n of [...SHORT, ...LONG]) {
        for (const kind of ['fft', 'ifft', 'rfft', 'irfft'] as const) {
          const c = sweepCase(kind, n);
          const x = randomTensor(c.shape);
          const count = await dispatchesOf([x], (t) => OPS[kind](t, c.options));
          expect(count, `${kind} n=${n}`).toBe(n <= 2048 ? 1 : globalDispatches(n));
          x.dispose();
        }
      }
      // The formula spelled out: 2049 = 3 * 683 is Bluestein with m = 4320 = 4^2 * 2 * 3^3 * 5 (7 passes each way);
      // 3000 = 4 * 2 * 3 * 5^3 and 4096 = 4^6 (6 passes); 4099 is prime: m = 8640 = 4^3 * 3^3 * 5 (7 each way).
      expect(LONG.map(globalDispatches)).toEqual([17, 8, 8, 17]);
    },
    SLOW,
  );
});

describe('fft errors are typed', () => {
  it('complex input without a trailing 2, bad n, int32 input', () => {
    const bad = tg.zeros([4, 3]);
    const flat = tg.zeros([4]);
    const z = tg.zeros([4, 2]);
    const r = tg.zeros([4]);
    const i32 = tg.zeros([4, 2], { dtype: 'int32' });
    const h1 = tg.zeros([1, 2]);
    for (const op of [tg.fft, tg.ifft, tg.irfft]) {
      expect(() => op(bad)).toThrow(ShapeError);
      expect(() => op(flat)).toThrow(ShapeError);
      expect(() => op(i32)).toThrow(DTypeError);
    }
    for (const n of [0, -1, 2.5, NaN]) {
      for (const op of [tg.fft, tg.ifft, tg.irfft]) expect(() => op(z, { n }), `n ${n}`).toThrow(ShapeError);
      expect(() => tg.rfft(r, { n }), `rfft n ${n}`).toThrow(ShapeError);
    }
    // irfft of one bin defaults to n = 0.
    expect(() => tg.irfft(h1)).toThrow(ShapeError);
    expect(() => tg.rfft(i32)).toThrow(DTypeError);
    expect(() => tg.fft(z, { dim: 1 })).toThrow(ShapeError);
    [bad, flat, z, r, i32, h1].forEach((t) => t.dispose());
  });

  it.skipIf(!gpu.available)('the same errors on WebGPU', async () => {
    const bad = (await tg.zeros([4, 3]).to('webgpu')) as Tensor;
    const i32 = (await tg.zeros([4, 2], { dtype: 'int32' }).to('webgpu')) as Tensor;
    expect(() => tg.fft(bad)).toThrow(ShapeError);
    expect(() => tg.rfft(i32)).toThrow(DTypeError);
    expect(() => tg.irfft(bad, { n: 0 })).toThrow(ShapeError);
    bad.dispose();
    i32.dispose();
  });
});
