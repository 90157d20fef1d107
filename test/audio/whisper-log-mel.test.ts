// logMelSpectrogram (Whisper's log-mel features) against the golden fixtures of tools/audio-reference/audio_reference.py,
// a float64 numpy port of openai-whisper's log_mel_spectrogram with librosa's mel filters:
// test/fixtures/audio/whisper-logmel-80.safetensors (syntheticSignal(30), 80 mels, [80, 3000]) and
// whisper-logmel-128.safetensors (syntheticSignal(4), 128 mels, [128, 400]), each with audio_probe = audio[::1000],
// which pins syntheticSignal itself bit for bit. Also covered: a batch [2, T] is normalized per example (each row
// equals the example run alone), the `padding` option equals the log-mel of the zero-padded audio, exactly 3
// dispatches on WebGPU, and typed errors (audio of <= 200 samples, 3-D audio, int32 audio, bad options).
//
// Tolerances: the outputs are (log10(mel) + 4) / 4, so 1e-4 is a 4e-4 error in log10 (0.1 % in mel power). The
// CPU backend computes in float64 and rounds once to float32: measured max |diff| 4.6e-6 (30 s) / 5.6e-6 (4 s).
// WebGPU runs the DFT, the mel product and the log in float32 (as whisper itself does): measured 2.5e-5 / 2.9e-5
// (3.2e-5 / 3.0e-5 before the band-limited mel projection). A wrong window, a dropped or shifted frame, the wrong
// filter bank or a missing clamp moves values by 1e-2 or more. Batch / padding comparisons run the same kernels on
// the same values and are held to 1e-6 (CPU) and 1e-5 (WebGPU).
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { DTypeError, SafetensorsFile, setDefaultDevice, ShapeError, type Tensor } from '../../src/index.js';
import { expectClose, takeValues } from '../helpers/compare.js';
import { dispatchesOf, setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'audio');
const FIXTURE_TOL = { atol: 1e-4, rtol: 0 };
const SAME_CPU = { atol: 1e-6, rtol: 0 };
const SAME_GPU = { atol: 1e-5, rtol: 0 };
/** The 30 s case: 480000 samples, 3000 frames of a 400-point DFT; seconds on the CPU, longer on SwiftShader. */
const SLOW = { timeout: 300_000 };

interface Fixture {
  logmel: Float32Array;
  shape: number[];
  probe: Float32Array;
  metadata: Record<string, string>;
}

async function readFixture(name: string): Promise<Fixture> {
  const file = await SafetensorsFile.open(join(FIXTURES, name));
  try {
    expect(file.names.sort()).toEqual(['audio_probe', 'logmel']);
    const lm = await file.load('logmel', { device: 'cpu' });
    const shape = [...lm.shape];
    const logmel = await takeValues(lm);
    const probe = await takeValues(await file.load('audio_probe', { device: 'cpu' }));
    return { logmel, shape, probe, metadata: { ...file.metadata } };
  } finally {
    await file.close();
  }
}

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i] - b[i]);
    if (!(d <= m)) m = Number.isNaN(d) ? Infinity : d;
  }
  return m;
}

async function logMelOn(
  device: 'cpu' | 'webgpu',
  audio: Float32Array,
  options: tg.LogMelOptions = {},
  shape?: number[],
): Promise<{ values: Float32Array; shape: readonly number[] }> {
  const x = tg.tensor(audio, { shape: shape ?? [audio.length], device: device });
  try {
    const r = tg.logMelSpectrogram(x, options);
    const s = [...r.shape];
    expect(r.dtype).toBe('float32');
    expect(r.device).toBe(device);
    return { values: await takeValues(r), shape: s };
  } finally {
    x.dispose();
  }
}

const DEVICES = (['cpu', 'webgpu'] as const).filter((d) => d === 'cpu' || gpu.available);

describe('logMelSpectrogram vs the whisper numpy reference', () => {
  let f80: Fixture;
  let f128: Fixture;
  let audio30: Float32Array;
  let audio4: Float32Array;

  beforeAll(async () => {
    f80 = await readFixture('whisper-logmel-80.safetensors');
    f128 = await readFixture('whisper-logmel-128.safetensors');
    audio30 = tg.syntheticSignal(30);
    audio4 = tg.syntheticSignal(4);
  });

  it('the fixtures describe what the tests assume', () => {
    expect(f80.shape).toEqual([80, 3000]);
    expect(f128.shape).toEqual([128, 400]);
    expect(f80.metadata).toMatchObject({ seconds: '30', n_mels: '80', sample_rate: '16000', n_fft: '400', hop_length: '160' });
    expect(f128.metadata).toMatchObject({ seconds: '4', n_mels: '128' });
    expect(audio30.length).toBe(tg.WHISPER_N_SAMPLES);
  });

  it("audio_probe is syntheticSignal's samples [::1000], bit for bit", () => {
    for (const [f, audio] of [
      [f80, audio30],
      [f128, audio4],
    ] as const) {
      const probe = Float32Array.from({ length: Math.ceil(audio.length / 1000) }, (_, i) => audio[i * 1000]);
      expect(probe.length).toBe(f.probe.length);
      // Float32Array equality compares the float32 values exactly.
      expect(probe).toEqual(f.probe);
    }
  });

  for (const device of DEVICES) {
    it(`80 mels, 30 s (${device}): [80, 3000] within 1e-4`, SLOW, async () => {
      const r = await logMelOn(device, audio30);
      expect(r.shape).toEqual([80, 3000]);
      expectClose(r.values, f80.logmel, FIXTURE_TOL, `80 mels ${device}, max |diff| ${maxAbsDiff(r.values, f80.logmel).toExponential(2)}`);
      console.log(`whisper log-mel 80 x 3000 (${device}): max |diff| vs fixture ${maxAbsDiff(r.values, f80.logmel).toExponential(2)}`);
    });

    it(`128 mels, 4 s (${device}): [128, 400] within 1e-4`, async () => {
      const r = await logMelOn(device, audio4, { nMels: 128 });
      expect(r.shape).toEqual([128, 400]);
      expectClose(r.values, f128.logmel, FIXTURE_TOL, `128 mels ${device}, max |diff| ${maxAbsDiff(r.values, f128.logmel).toExponential(2)}`);
      console.log(`whisper log-mel 128 x 400 (${device}): max |diff| vs fixture ${maxAbsDiff(r.values, f128.logmel).toExponential(2)}`);
    });
  }
});

/** Two examples whose maxima differ by ~4 in log10: a joint normalization would floor most of the quiet one. */
function twoExamples(): { loud: Float32Array; quiet: Float32Array } {
  const loud = tg.syntheticSignal(1);
  const other = tg.syntheticSignal(1.5);
  const quiet = Float32Array.from(loud, (_, i) => 0.01 * other[other.length - 1 - i]);
  return { loud, quiet };
}

for (const device of DEVICES) {
  describe(`logMelSpectrogram behaviour (${device}) ${device === 'webgpu' ? gpu.skipReason : ''}`, () => {
    const same = device === 'cpu' ? SAME_CPU : SAME_GPU;

    it('a batch [2, T] normalizes each example on its own (equal to running each alone)', async () => {
      const { loud, quiet } = twoExamples();
      const both = new Float32Array(2 * loud.length);
      both.set(loud, 0);
      both.set(quiet, loud.length);
      const batch = await logMelOn(device, both, {}, [2, loud.length]);
      expect(batch.shape).toEqual([2, 80, 100]);
      const a = await logMelOn(device, loud);
      const b = await logMelOn(device, quiet);
      expectClose(batch.values.subarray(0, 8000), a.values, same, 'example 0');
      expectClose(batch.values.subarray(8000), b.values, same, 'example 1');
      // The quiet example has ~1e-4 of the loud one's power (~1 lower after / 4) and reaches below the loud
      // example's floor (its max - 2): a floor shared across the batch would have clipped it.
      const maxOf = (v: Float32Array) => v.reduce((m, x) => Math.max(m, x), -Infinity);
      const minOf = (v: Float32Array) => v.reduce((m, x) => Math.min(m, x), Infinity);
      expect(maxOf(a.values) - maxOf(b.values)).toBeGreaterThan(0.9);
      expect(minOf(b.values)).toBeLessThan(maxOf(a.values) - 2.5);
      for (const v of [a.values, b.values]) expect(minOf(v)).toBeGreaterThanOrEqual(maxOf(v) - 2 - 1e-6);
    });

    it('padding equals the log-mel of the zero-padded audio', async () => {
      const audio = tg.syntheticSignal(0.5);
      for (const padding of [1, 160, 1000]) {
        const padded = new Float32Array(audio.length + padding);
        padded.set(audio);
        const got = await logMelOn(device, audio, { padding });
        const want = await logMelOn(device, padded);
        expect(got.shape).toEqual([80, Math.floor((audio.length + padding) / 160)]);
        expect(got.shape).toEqual(want.shape);
        expectClose(got.values, want.values, same, `padding ${padding}`);
      }
      // Padding can make too-short audio long enough (whisper pads before the STFT).
      const short = audio.subarray(0, 100);
      const padded = new Float32Array(400);
      padded.set(short);
      const got = await logMelOn(device, short, { padding: 300 });
      const want = await logMelOn(device, padded);
      expect(got.shape).toEqual([80, 2]);
      expectClose(got.values, want.values, same, 'padding 300 of 100 samples');
    });

    it('201 samples (the shortest reflect padding allows) give one frame', async () => {
      const r = await logMelOn(device, tg.syntheticSignal(201 / 16000));
      expect(r.shape).toEqual([80, 1]);
      expect(r.values.every(Number.isFinite)).toBe(true);
    });

    it('typed errors: <= 200 samples, 3-D audio, int32 audio, bad nMels / padding', async () => {
      const make = (shape: number[], dtype = 'float32') => tg.zeros(shape, { dtype, device });
      const cases: [string, number[], string, tg.LogMelOptions, typeof ShapeError][] = [
        ['200 samples', [200], 'float32', {}, ShapeError],
        ['10 samples', [10], 'float32', {}, ShapeError],
        ['batch of 200 samples', [2, 200], 'float32', {}, ShapeError],
        ['3-D audio', [1, 2, 1600], 'float32', {}, ShapeError],
        ['0-D audio', [], 'float32', {}, ShapeError],
        ['int32 audio', [1600], 'int32', {}, DTypeError],
        ['nMels 0', [1600], 'float32', { nMels: 0 }, ShapeError],
        ['nMels 2.5', [1600], 'float32', { nMels: 2.5 }, ShapeError],
        ['padding -1', [1600], 'float32', { padding: -1 }, ShapeError],
        ['padding 1.5', [1600], 'float32', { padding: 1.5 }, ShapeError],
      ];
      for (const [label, shape, dtype, options, type] of cases) {
        const x = make(shape, dtype);
        try {
          expect(() => tg.logMelSpectrogram(x, options), label).toThrow(type);
        } finally {
          x.dispose();
        }
      }
    });
  });
}

describe.skipIf(!gpu.available)(`logMelSpectrogram dispatches on WebGPU ${gpu.skipReason}`, () => {
  it('exactly 3 dispatches (STFT power, mel + log + maxima, normalization), for [T] and [B, T]', async () => {
    const audio = tg.tensor(tg.syntheticSignal(1), { device: 'cpu' });
    const batch = tg.tensor(
      Float32Array.from({ length: 3 * 16000 }, (_, i) => Math.sin(i * 0.01)),
      { shape: [3, 16000], device: 'cpu' },
    );
    try {
      expect(await dispatchesOf([audio], (a: Tensor) => tg.logMelSpectrogram(a))).toBe(3);
      expect(await dispatchesOf([audio], (a: Tensor) => tg.logMelSpectrogram(a, { nMels: 128 }))).toBe(3);
      expect(await dispatchesOf([batch], (a: Tensor) => tg.logMelSpectrogram(a))).toBe(3);
    } finally {
      audio.dispose();
      batch.dispose();
    }
  });
});
