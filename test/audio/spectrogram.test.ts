// spectrogram / melSpectrogram / amplitudeToDb (torchaudio.transforms.Spectrogram, MelSpectrogram, AmplitudeToDB)
// composed from the pieces they are defined by: spectrogram (power 2 and magnitude 1) equals |X|^2 / |X| of
// `stft` with the same options, and its defaults are torchaudio's (nFft 400, periodic Hann of winLength, hop
// winLength / 2, centred reflect frames); melSpectrogram equals melFilterbankValues(...) @ spectrogram computed here
// on the host in float64, with torchaudio's defaults (htk scale, norm null, 128 mels, 16 kHz); amplitudeToDb equals
// its formula evaluated on the host (power and magnitude, ref, amin, topDb with the max taken per spectrogram of a
// batch). Every case runs on the CPU and, when WebGPU is there, on WebGPU and against the CPU; errors are typed.
//
// Tolerances, relative to each spectrogram's peak P: |X|^2 from stft's float32 (re, im) vs the fused power is one
// float32 rounding apart on the CPU (float64 inside); on WebGPU both come from float32 DFTs, whose absolute error is
// ~1e-7 of the peak magnitude, i.e. ~2e-7 P in power for the smallest bins: rtol 1e-5 plus atol 1e-6 P (magnitude:
// 1e-6 of its peak). The mel product sums <= 513 non-negative terms in float32 on WebGPU: rtol 1e-5, atol 1e-6 of the
// peak. dB values (|dB| < ~100) are a few float32 ulp of a log: atol 1e-4. Measured (printed per check): spectrogram
// vs |stft|^p <= 1.3e-7 of the peak (CPU) / 8.3e-8 (WebGPU), WebGPU vs CPU <= 1.7e-7; melSpectrogram vs the host
// product <= 5.6e-8 / 9.6e-8; amplitudeToDb vs the host formula <= 9.6e-6 dB (CPU) / 1.1e-5 dB (WebGPU).
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice, ShapeError, type Tensor } from '../../src/index.js';
import { checkBoth, expectClose, takeValues, type Tolerance } from '../helpers/compare.js';
import { dispatchesOf, setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const DEVICES = (['cpu', 'webgpu'] as const).filter((d) => d === 'cpu' || gpu.available);
type Device = (typeof DEVICES)[number];

const T = 4800;
/** [2, T]: the test signal and a quieter, reversed, longer-chirp one. */
function signals(): Float32Array {
  const a = tg.syntheticSignal(T / 16000);
  const b = tg.syntheticSignal(0.5);
  const out = new Float32Array(2 * T);
  out.set(a);
  for (let i = 0; i < T; i++) out[T + i] = 0.05 * b[b.length - 1 - i];
  return out;
}

function peak(v: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < v.length; i++) m = Math.max(m, Math.abs(v[i]));
  return m;
}
const relTol = (v: ArrayLike<number>, rel: number, rtol = 1e-5): Tolerance => ({ atol: rel * peak(v), rtol });

function maxRelToPeak(got: ArrayLike<number>, want: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < want.length; i++) m = Math.max(m, Math.abs(got[i] - want[i]));
  return m / peak(want);
}

interface SpecCase {
  label: string;
  options: tg.SpectrogramOptions;
  /** The same framing spelled out for stft (window built by the test). */
  stft: (device: Device) => tg.StftOptions;
  bins: number;
  frames: number;
}

const hann = (n: number, device: Device) => tg.hannWindow(n, { device });
const SPEC_CASES: SpecCase[] = [
  {
    label: 'defaults (nFft 400, hann 400, hop 200)',
    options: {},
    stft: (d) => ({ nFft: 400, hopLength: 200, window: hann(400, d) }),
    bins: 201,
    frames: 1 + Math.floor(T / 200),
  },
  {
    label: 'winLength 300 < nFft 512 (hop defaults to 150)',
    options: { nFft: 512, winLength: 300 },
    stft: (d) => ({ nFft: 512, hopLength: 150, winLength: 300, window: hann(300, d) }),
    bins: 257,
    frames: 1 + Math.floor(T / 150),
  },
  {
    label: 'hamming window, hop 128, not centred',
    options: { nFft: 256, hopLength: 128, center: false, window: tg.hammingWindow(256) },
    stft: (d) => ({ nFft: 256, hopLength: 128, center: false, window: tg.hammingWindow(256, { device: d }) }),
    bins: 129,
    frames: 1 + Math.floor((T - 256) / 128),
  },
  {
    label: 'constant padding, normalized',
    options: { nFft: 400, hopLength: 160, padMode: 'constant', normalized: true },
    stft: (d) => ({ nFft: 400, hopLength: 160, padMode: 'constant', normalized: true, window: hann(400, d) }),
    bins: 201,
    frames: 1 + Math.floor(T / 160),
  },
];

/** The case's options with its window (if any) moved to device. */
async function onDevice(options: tg.SpectrogramOptions, device: Device): Promise<tg.SpectrogramOptions> {
  if (!options.window || device === 'cpu') return options;
  return { ...options, window: await options.window.to('webgpu') };
}

async function run(device: Device, values: Float32Array, shape: number[], fn: (x: Tensor) => Tensor): Promise<{ values: Float32Array; shape: number[] }> {
  const x = tg.tensor(values, { shape, device });
  try {
    const r = fn(x);
    expect(r.device).toBe(device);
    expect(r.dtype).toBe('float32');
    const s = [...r.shape];
    return { values: await takeValues(r), shape: s };
  } finally {
    x.dispose();
  }
}

for (const device of DEVICES) {
  describe(`spectrogram = |stft|^p (${device}) ${device === 'webgpu' ? gpu.skipReason : ''}`, () => {
    it.each(SPEC_CASES.map((c) => [c.label, c] as const))('%s', async (_, c) => {
      const x = signals();
      const stftOptions = c.stft(device);
      const options = await onDevice(c.options, device);
      try {
        const complex = await run(device, x, [2, T], (t) => tg.stft(t, stftOptions));
        expect(complex.shape).toEqual([2, c.bins, c.frames, 2]);
        const n = 2 * c.bins * c.frames;
        const power = new Float64Array(n);
        for (let i = 0; i < n; i++) power[i] = complex.values[2 * i] ** 2 + complex.values[2 * i + 1] ** 2;
        const magnitude = power.map(Math.sqrt);
        for (const [p, want] of [
          [2, power],
          [1, magnitude],
        ] as const) {
          const got = await run(device, x, [2, T], (t) => tg.spectrogram(t, { ...options, power: p }));
          expect(got.shape).toEqual([2, c.bins, c.frames]);
          expectClose(got.values, want, relTol(want, 1e-6), `${c.label} power ${p}`);
          console.log(`spectrogram ${c.label} power ${p} (${device}): max |diff| / peak ${maxRelToPeak(got.values, want).toExponential(2)}`);
        }
        // power 2 is the default; a 1-D signal gives [bins, frames].
        const byDefault = await run(device, x.subarray(0, T), [T], (t) => tg.spectrogram(t, options));
        expect(byDefault.shape).toEqual([c.bins, c.frames]);
        const first = power.subarray(0, c.bins * c.frames);
        expectClose(byDefault.values, first, relTol(first, 1e-6), `${c.label} default power, 1-D`);
      } finally {
        stftOptions.window?.dispose();
        if (options.window !== c.options.window) options.window?.dispose();
      }
    });
  });

  describe(`melSpectrogram = melFilterbank @ spectrogram (${device}) ${device === 'webgpu' ? gpu.skipReason : ''}`, () => {
    const MEL_CASES: { label: string; options: tg.MelSpectrogramOptions; bank: tg.MelFilterbankOptions; spec: tg.SpectrogramOptions; nMels: number }[] = [
      {
        label: 'torchaudio defaults (16 kHz, 128 mels, htk, norm null)',
        options: {},
        bank: { sampleRate: 16000, nFft: 400, nMels: 128, melScale: 'htk', norm: null },
        spec: {},
        nMels: 128,
      },
      {
        label: 'librosa-style 22.05 kHz, nFft 1024, 64 slaney mels 20 Hz .. 8 kHz, magnitude',
        options: { sampleRate: 22050, nFft: 1024, hopLength: 256, nMels: 64, fMin: 20, fMax: 8000, melScale: 'slaney', norm: 'slaney', power: 1 },
        bank: { sampleRate: 22050, nFft: 1024, nMels: 64, fMin: 20, fMax: 8000, melScale: 'slaney', norm: 'slaney' },
        spec: { nFft: 1024, hopLength: 256, power: 1 },
        nMels: 64,
      },
      {
        label: 'whisper-like 80 slaney mels, hop 160',
        options: { nMels: 80, hopLength: 160, melScale: 'slaney', norm: 'slaney', fMax: 8000 },
        bank: { sampleRate: 16000, nFft: 400, nMels: 80, fMax: 8000 },
        spec: { hopLength: 160 },
        nMels: 80,
      },
    ];

    it.each(MEL_CASES.map((c) => [c.label, c] as const))('%s', async (_, c) => {
      const x = signals();
      const spec = await run(device, x, [2, T], (t) => tg.spectrogram(t, c.spec));
      const [, bins, frames] = spec.shape;
      const bank = tg.melFilterbankValues(c.bank);
      expect(bank.length).toBe(c.nMels * bins);
      const want = new Float64Array(2 * c.nMels * frames);
      for (let b = 0; b < 2; b++) {
        for (let m = 0; m < c.nMels; m++) {
          for (let f = 0; f < frames; f++) {
            let acc = 0;
            for (let k = 0; k < bins; k++) acc += bank[m * bins + k] * spec.values[(b * bins + k) * frames + f];
            want[(b * c.nMels + m) * frames + f] = acc;
          }
        }
      }
      const got = await run(device, x, [2, T], (t) => tg.melSpectrogram(t, c.options));
      expect(got.shape).toEqual([2, c.nMels, frames]);
      expectClose(got.values, want, relTol(want, 1e-6), c.label);
      console.log(`melSpectrogram ${c.label} (${device}): max |diff| / peak ${maxRelToPeak(got.values, want).toExponential(2)}`);
    });
  });

  describe(`amplitudeToDb vs its formula (${device}) ${device === 'webgpu' ? gpu.skipReason : ''}`, () => {
    const DB_CASES: { label: string; power: 1 | 2; options: tg.AmplitudeToDbOptions }[] = [
      { label: 'power, defaults', power: 2, options: {} },
      { label: 'power, ref 100, amin 1e-5', power: 2, options: { ref: 100, amin: 1e-5 } },
      { label: 'power, topDb 60', power: 2, options: { topDb: 60 } },
      { label: 'magnitude, ref 10, topDb 30', power: 1, options: { stype: 'magnitude', ref: 10, topDb: 30 } },
      { label: 'magnitude, amin 1e-3 above some values, ref < amin', power: 1, options: { stype: 'magnitude', amin: 1e-3, ref: 1e-4 } },
      { label: 'power, topDb 0 (everything at its own peak)', power: 2, options: { topDb: 0 } },
    ];

    /** multiplier log10(max(x, amin)) - multiplier log10(max(amin, ref)), floored at (per-spectrogram max) - topDb. */
    function hostDb(x: Float32Array, shape: number[], o: tg.AmplitudeToDbOptions): Float64Array {
      const mult = (o.stype ?? 'power') === 'power' ? 10 : 20;
      const amin = o.amin ?? 1e-10;
      const ref = o.ref ?? 1;
      const db = Float64Array.from(x, (v) => mult * Math.log10(Math.max(v, amin)) - mult * Math.log10(Math.max(amin, ref)));
      if (o.topDb === undefined) return db;
      const per = shape[shape.length - 1] * shape[shape.length - 2];
      for (let s = 0; s < db.length; s += per) {
        let m = -Infinity;
        for (let i = s; i < s + per; i++) m = Math.max(m, db[i]);
        for (let i = s; i < s + per; i++) db[i] = Math.max(db[i], m - o.topDb);
      }
      return db;
    }

    it.each(DB_CASES.map((c) => [c.label, c] as const))('%s', async (_, c) => {
      const x = signals();
      // The second example is ~26 dB (power) quieter: a topDb floor shared across the batch would differ.
      const spec = await run(device, x, [2, T], (t) => tg.spectrogram(t, { power: c.power }));
      const want = hostDb(spec.values, spec.shape, c.options);
      const got = await run(device, spec.values, spec.shape, (t) => tg.amplitudeToDb(t, c.options));
      expect(got.shape).toEqual(spec.shape);
      expectClose(got.values, want, { atol: 1e-4, rtol: 0 }, c.label);
      let worst = 0;
      for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got.values[i] - want[i]));
      console.log(`amplitudeToDb ${c.label} (${device}): max |diff| ${worst.toExponential(2)} dB`);
      if (c.options.topDb !== undefined) {
        // The floor is per spectrogram: one shared by the whole batch gives other values (by > 1 dB somewhere).
        const shared = hostDb(spec.values, [1, spec.values.length], c.options);
        expect(Math.max(...want.map((v, i) => Math.abs(v - shared[i])))).toBeGreaterThan(1);
      }
    });

    it('a 1-D input works without topDb', async () => {
      const v = Float32Array.from([0, 1e-12, 1e-3, 1, 100]);
      const got = await run(device, v, [5], (t) => tg.amplitudeToDb(t));
      expectClose(got.values, [-100, -100, -30, 0, 20], { atol: 1e-4, rtol: 0 }, '1-D');
    });
  });
}

describe.skipIf(!gpu.available)(`WebGPU vs CPU ${gpu.skipReason}`, () => {
  it('spectrogram (power, magnitude), melSpectrogram and amplitudeToDb agree across devices', async () => {
    const x = tg.tensor(signals(), { shape: [2, T], device: 'cpu' });
    const cpuSpec = tg.spectrogram(x);
    try {
      for (const power of [1, 2] as const) {
        const want = await tg.spectrogram(x, { power }).toArray();
        const r = await checkBoth([x], (a) => tg.spectrogram(a, { power }), relTol(want, 1e-6), `spectrogram power ${power}`);
        console.log(`spectrogram power ${power}: WebGPU vs CPU max |diff| / peak ${maxRelToPeak(r.gpu, r.cpu).toExponential(2)}`);
      }
      const mel = await tg.melSpectrogram(x).toArray();
      const r = await checkBoth([x], (a) => tg.melSpectrogram(a), relTol(mel, 1e-6), 'melSpectrogram');
      console.log(`melSpectrogram: WebGPU vs CPU max |diff| / peak ${maxRelToPeak(r.gpu, r.cpu).toExponential(2)}`);
      await checkBoth([cpuSpec], (s) => tg.amplitudeToDb(s, { topDb: 80 }), { atol: 1e-4, rtol: 0 }, 'amplitudeToDb');
      await checkBoth(
        [cpuSpec],
        (s) => tg.amplitudeToDb(s.sqrt(), { stype: 'magnitude', ref: 3, amin: 1e-4 }),
        { atol: 1e-4, rtol: 0 },
        'amplitudeToDb magnitude',
      );
    } finally {
      x.dispose();
      cpuSpec.dispose();
    }
  });

  it('spectrogram is one dispatch, melSpectrogram two', async () => {
    const x = tg.tensor(signals(), { shape: [2, T], device: 'cpu' });
    try {
      expect(await dispatchesOf([x], (a: Tensor) => tg.spectrogram(a))).toBe(1);
      expect(await dispatchesOf([x], (a: Tensor) => tg.spectrogram(a, { power: 1 }))).toBe(1);
      expect(await dispatchesOf([x], (a: Tensor) => tg.melSpectrogram(a))).toBe(2);
    } finally {
      x.dispose();
    }
  });
});

describe('errors', () => {
  it('are typed', () => {
    const x = tg.zeros([1000]);
    const short = tg.zeros([100]);
    const spec = tg.ones([2, 5, 7]);
    const flat = tg.ones([5]);
    try {
      expect(() => tg.spectrogram(x, { power: 3 as 2 })).toThrow(ShapeError);
      expect(() => tg.spectrogram(short)).toThrow(ShapeError); // reflect padding of 200 > 100 samples
      expect(() => tg.melSpectrogram(x, { nMels: 0 })).toThrow(ShapeError);
      expect(() => tg.melSpectrogram(x, { fMin: 9000 })).toThrow(ShapeError); // fMax 8000 < fMin
      expect(() => tg.amplitudeToDb(spec, { amin: 0 })).toThrow(ShapeError);
      expect(() => tg.amplitudeToDb(spec, { topDb: -1 })).toThrow(ShapeError);
      expect(() => tg.amplitudeToDb(flat, { topDb: 80 })).toThrow(ShapeError);
    } finally {
      [x, short, spec, flat].forEach((t) => t.dispose());
    }
  });
});
