// resample / resampleKernel (torchaudio.functional.resample, sinc_interp_hann) against the golden fixtures of
// tools/audio-reference/audio_reference.py (test/fixtures/audio/resample.safetensors, a float64 numpy port of
// torchaudio's _get_sinc_resample_kernel / _apply_sinc_resample_kernel): per case r44100_16000, r48000_16000,
// r16000_22050 and r16000_8000, <case>_input (syntheticSignal at the source rate), <case>_output, and <case>_kernel
// (the first min(new, 8) phases of the filter bank); the header's __metadata__ gives orig/new/gcd/width. Also: a
// direct per-output windowed-sinc sum written here (non-default lowpassFilterWidth / rolloff), equal rates returning
// a copy, the output length ceil(T new / orig), a 1 kHz sine staying a 1 kHz sine through 48 kHz -> 16 kHz, batch
// dims, one dispatch on WebGPU, and typed errors.
//
// Tolerances: outputs are sums of up to 2 width + orig = 475 taps (44.1 kHz -> 16 kHz) of signals in [-0.9, 0.9].
// The CPU backend accumulates in float64 (filters rounded to float32): measured max |diff| 6.0e-8 on every case;
// WebGPU accumulates in float32: measured 1.2e-7 .. 2.4e-7. 1e-5 absolute leaves margin, while a one-sample shift
// or a wrong phase costs > 1e-2. Kernels are float64 against the fixture's float32 values: 1e-6 absolute (values
// <= 0.99; measured 1.3e-8 .. 2.0e-8). The sine test compares against the exact 16 kHz sine: the filter's gain at
// 1 kHz is off by ~4e-4 (measured max |diff| 4.0e-4 on both devices), so 1e-3.
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { DTypeError, SafetensorsFile, setDefaultDevice, ShapeError, type Tensor } from '../../src/index.js';
import { checkBoth, expectClose, takeValues } from '../helpers/compare.js';
import { dispatchesOf, setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const FIXTURE = join(import.meta.dirname, '..', 'fixtures', 'audio', 'resample.safetensors');
const OUTPUT_TOL = { atol: 1e-5, rtol: 0 };
const KERNEL_TOL = { atol: 1e-6, rtol: 0 };
const CASES = ['r44100_16000', 'r48000_16000', 'r16000_22050', 'r16000_8000'] as const;
const DEVICES = (['cpu', 'webgpu'] as const).filter((d) => d === 'cpu' || gpu.available);

interface Case {
  input: Float32Array;
  output: Float32Array;
  kernel: Float32Array;
  kernelShape: number[];
  orig: number;
  new: number;
  gcd: number;
  width: number;
}

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i] - b[i]);
    if (!(d <= m)) m = Number.isNaN(d) ? Infinity : d;
  }
  return m;
}

async function resampleOn(
  device: 'cpu' | 'webgpu',
  values: Float32Array,
  shape: number[],
  from: number,
  to: number,
  options?: tg.ResampleOptions,
): Promise<{ values: Float32Array; shape: number[] }> {
  const x = tg.tensor(values, { shape, device });
  try {
    const r = tg.resample(x, from, to, options);
    expect(r.dtype).toBe('float32');
    expect(r.device).toBe(device);
    const s = [...r.shape];
    return { values: await takeValues(r), shape: s };
  } finally {
    x.dispose();
  }
}

/** torchaudio's resampler as a direct sum (the self-test's formula in audio_reference.py), in float64. */
function directResample(x: ArrayLike<number>, from: number, to: number, lowpass = 6, rolloff = 0.99): Float64Array {
  let a = from;
  let b = to;
  while (b) [a, b] = [b, a % b];
  const o = from / a;
  const nn = to / a;
  const base = Math.min(o, nn) * rolloff;
  const width = Math.ceil((lowpass * o) / base);
  const out = new Float64Array(Math.ceil((nn * x.length) / o));
  for (let m = 0; m < out.length; m++) {
    const k = Math.floor(m / nn);
    let acc = 0;
    for (let i = k * o - width; i < k * o + width + o; i++) {
      if (i < 0 || i >= x.length) continue;
      const tc = Math.min(Math.max((i / o - m / nn) * base, -lowpass), lowpass);
      const h = tc === 0 ? 1 : Math.sin(Math.PI * tc) / (Math.PI * tc);
      acc += x[i] * h * Math.cos((Math.PI * tc) / lowpass / 2) ** 2 * (base / o);
    }
    out[m] = acc;
  }
  return out;
}

describe('resample vs the torchaudio numpy reference', () => {
  const cases = new Map<string, Case>();

  beforeAll(async () => {
    const file = await SafetensorsFile.open(FIXTURE);
    try {
      const meta = file.metadata;
      expect(meta.lowpass_filter_width).toBe('6');
      expect(meta.rolloff).toBe('0.99');
      for (const c of CASES) {
        const kernel = await file.load(`${c}_kernel`, { device: 'cpu' });
        const kernelShape = [...kernel.shape];
        cases.set(c, {
          input: await takeValues(await file.load(`${c}_input`, { device: 'cpu' })),
          output: await takeValues(await file.load(`${c}_output`, { device: 'cpu' })),
          kernel: await takeValues(kernel),
          kernelShape,
          orig: Number(meta[`${c}_orig_freq`]),
          new: Number(meta[`${c}_new_freq`]),
          gcd: Number(meta[`${c}_gcd`]),
          width: Number(meta[`${c}_width`]),
        });
      }
    } finally {
      await file.close();
    }
  });

  it.each(CASES)('%s: the input is syntheticSignal at the source rate', (name) => {
    const c = cases.get(name)!;
    const seconds = c.orig === 16000 ? 0.1 : 0.25;
    expect(c.input).toEqual(tg.syntheticSignal(seconds, c.orig));
    expect(c.output.length).toBe(Math.ceil((c.input.length * c.new) / c.orig));
  });

  it.each(CASES)('%s: resampleKernel matches the first phases, width and reduced rates', (name) => {
    const c = cases.get(name)!;
    const k = tg.resampleKernel(c.orig, c.new);
    expect(k.orig).toBe(c.orig / c.gcd);
    expect(k.new).toBe(c.new / c.gcd);
    expect(k.width).toBe(c.width);
    const taps = 2 * k.width + k.orig;
    expect(k.values).toBeInstanceOf(Float64Array);
    expect(k.values.length).toBe(k.new * taps);
    expect(c.kernelShape).toEqual([Math.min(k.new, 8), taps]);
    expectClose(k.values.subarray(0, c.kernel.length), c.kernel, KERNEL_TOL, `${name} kernel`);
    console.log(`resample kernel ${name}: max |diff| vs fixture ${maxAbsDiff(k.values.subarray(0, c.kernel.length), c.kernel).toExponential(2)}`);
  });

  for (const device of DEVICES) {
    it.each(CASES)(`%s (${device}): output within 1e-5`, async (name) => {
      const c = cases.get(name)!;
      const r = await resampleOn(device, c.input, [c.input.length], c.orig, c.new);
      expect(r.shape).toEqual([c.output.length]);
      expectClose(r.values, c.output, OUTPUT_TOL, `${name} ${device}`);
      console.log(`resample ${name} (${device}): max |diff| vs fixture ${maxAbsDiff(r.values, c.output).toExponential(2)}`);
    });
  }
});

for (const device of DEVICES) {
  describe(`resample behaviour (${device}) ${device === 'webgpu' ? gpu.skipReason : ''}`, () => {
    it('non-default lowpassFilterWidth / rolloff match a direct windowed-sinc sum', async () => {
      const x = tg.syntheticSignal(0.02, 44100);
      for (const [from, to, options] of [
        [44100, 16000, { lowpassFilterWidth: 3, rolloff: 0.9 }],
        [16000, 44100, { lowpassFilterWidth: 10, rolloff: 0.5 }],
        [3, 2, { rolloff: 1 }],
      ] as const) {
        const r = await resampleOn(device, x, [x.length], from, to, options);
        expectClose(r.values, directResample(x, from, to, options.lowpassFilterWidth, options.rolloff), OUTPUT_TOL, `${from} -> ${to}`);
      }
    });

    it('equal rates return a float32 copy', async () => {
      const values = tg.syntheticSignal(0.01);
      for (const dtype of ['float32', 'float16'] as const) {
        const x = tg.tensor(values, { device, dtype });
        const y = tg.resample(x, 16000, 16000);
        expect(y).not.toBe(x);
        expect(y.dtype).toBe('float32');
        expect(y.shape).toEqual(x.shape);
        const want = await x.to('float32' as const).toArray();
        y.dispose();
        // x survives the copy's disposal.
        expect(await takeValues(x)).toEqual(Float32Array.from(want));
        const y2 = tg.resample(tg.tensor(values, { device, dtype }), 44100, 44100, { lowpassFilterWidth: 3 });
        expect(await takeValues(y2)).toEqual(Float32Array.from(want));
      }
    });

    it('output length is ceil(T new / orig)', async () => {
      for (const [from, to] of [
        [44100, 16000],
        [16000, 22050],
        [48000, 16000],
        [8000, 48000],
      ] as const) {
        for (const t of [1, 2, 7, 100, 441, 1001]) {
          const x = Float32Array.from({ length: t }, (_, i) => Math.sin(i));
          const r = await resampleOn(device, x, [t], from, to);
          expect(r.shape, `${from} -> ${to}, T ${t}`).toEqual([Math.ceil((t * to) / from)]);
          expectClose(r.values, directResample(x, from, to), OUTPUT_TOL, `${from} -> ${to}, T ${t}`);
        }
      }
    });

    it('a 1 kHz sine at 48 kHz is a 1 kHz sine at 16 kHz (away from the edges)', async () => {
      const x = Float32Array.from({ length: 4800 }, (_, i) => Math.sin((2 * Math.PI * 1000 * i) / 48000));
      const r = await resampleOn(device, x, [4800], 48000, 16000);
      expect(r.shape).toEqual([1600]);
      const want = Float32Array.from({ length: 1600 }, (_, i) => Math.sin((2 * Math.PI * 1000 * i) / 16000));
      const edge = 100;
      expectClose(r.values.subarray(edge, 1600 - edge), want.subarray(edge, 1600 - edge), { atol: 1e-3, rtol: 0 }, '1 kHz sine');
      console.log(
        `1 kHz sine 48k -> 16k (${device}): max |diff| ${maxAbsDiff(r.values.subarray(edge, 1600 - edge), want.subarray(edge, 1600 - edge)).toExponential(2)}`,
      );
    });

    it('batch dims [2, 3, T]: each row resampled on its own', async () => {
      const t = 900;
      const values = Float32Array.from({ length: 6 * t }, (_, i) => Math.sin(i * (0.01 + 0.003 * Math.floor(i / t))) * (1 + Math.floor(i / t)));
      const r = await resampleOn(device, values, [2, 3, t], 44100, 16000);
      const n = Math.ceil((t * 160) / 441);
      expect(r.shape).toEqual([2, 3, n]);
      for (let row = 0; row < 6; row++) {
        const alone = await resampleOn(device, values.subarray(row * t, (row + 1) * t), [t], 44100, 16000);
        expectClose(r.values.subarray(row * n, (row + 1) * n), alone.values, { atol: 1e-6, rtol: 0 }, `row ${row}`);
      }
    });

    it('typed errors: non-integer / non-positive rates, bad options, int32 and 0-d inputs', () => {
      const x = tg.zeros([100], { device });
      const xi = tg.zeros([100], { device, dtype: 'int32' });
      const x0 = tg.zeros([], { device });
      try {
        for (const [from, to] of [
          [44100.5, 16000],
          [44100, 16000.5],
          [0, 16000],
          [16000, 0],
          [-16000, 8000],
          [NaN, 8000],
          [Infinity, 8000],
        ]) {
          expect(() => tg.resample(x, from, to), `${from} -> ${to}`).toThrow(ShapeError);
        }
        expect(() => tg.resample(x, 16000.5, 16000.5)).toThrow(ShapeError);
        expect(() => tg.resample(x, 44100, 16000, { lowpassFilterWidth: 0 })).toThrow(ShapeError);
        expect(() => tg.resample(x, 44100, 16000, { rolloff: 0 })).toThrow(ShapeError);
        expect(() => tg.resample(x, 44100, 16000, { rolloff: 1.5 })).toThrow(ShapeError);
        expect(() => tg.resample(xi, 44100, 16000)).toThrow(DTypeError);
        expect(() => tg.resample(x0, 44100, 16000)).toThrow(ShapeError);
        expect(() => tg.resampleKernel(44100, 16000, { lowpassFilterWidth: -1 })).toThrow(ShapeError);
      } finally {
        [x, xi, x0].forEach((t) => t.dispose());
      }
    });
  });
}

describe.skipIf(!gpu.available)(`resample on WebGPU ${gpu.skipReason}`, () => {
  it('exactly 1 dispatch, for [T] and [B, C, T]', async () => {
    const x = tg.tensor(tg.syntheticSignal(0.05, 44100), { device: 'cpu' });
    const xb = tg.tensor(
      Float32Array.from({ length: 6 * 500 }, (_, i) => Math.sin(i * 0.02)),
      { shape: [2, 3, 500], device: 'cpu' },
    );
    try {
      expect(await dispatchesOf([x], (a: Tensor) => tg.resample(a, 44100, 16000))).toBe(1);
      expect(await dispatchesOf([x], (a: Tensor) => tg.resample(a, 16000, 22050))).toBe(1);
      expect(await dispatchesOf([xb], (a: Tensor) => tg.resample(a, 48000, 16000))).toBe(1);
    } finally {
      x.dispose();
      xb.dispose();
    }
  });

  it('WebGPU vs CPU on a float16 input and a strided view', async () => {
    const x = tg.tensor(tg.syntheticSignal(0.05, 48000), { device: 'cpu', dtype: 'float16' });
    const y = tg.tensor(
      Float32Array.from({ length: 2 * 700 }, (_, i) => Math.cos(i * 0.05)),
      { shape: [700, 2], device: 'cpu' },
    );
    try {
      await checkBoth([x], (a) => tg.resample(a, 48000, 16000), OUTPUT_TOL, 'float16');
      await checkBoth([y], (a) => tg.resample(a.transpose(0, 1), 16000, 44100), OUTPUT_TOL, 'transposed [2, 700]');
    } finally {
      x.dispose();
      y.dispose();
    }
  });
});
