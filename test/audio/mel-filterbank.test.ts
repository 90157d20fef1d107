// melFilterbank / melFilterbankValues against librosa.filters.mel as ported to float64 numpy in
// tools/audio-reference/audio_reference.py (test/fixtures/audio/mel-filters.safetensors): slaney_80 and slaney_128
// (Whisper's banks: sr 16000, n_fft 400, fmax 8000), htk_none_40 (sr 22050, n_fft 1024, fmin 20, fmax 8000, htk,
// norm None) and slaney_64_default_fmax (sr 22050, n_fft 512, fmax = sr / 2 by default). Also the mel-scale
// identities (slaney: linear below 1 kHz with 1000 Hz = 15 mels, 6400 Hz = 42; htk: 700 Hz = 2595 log10 2), round
// trips, the default options (nMels 128, slaney, norm 'slaney'), the tensor's dtype / shape / device, and typed errors.
//
// Tolerances: the fixture is float64 rounded to float32, and melFilterbank is float64 rounded to float32 too, so
// they differ only where the two float64 computations round to neighbouring floats: 1e-6 relative (about 8 float32
// ulp) plus 1e-8 absolute for the zeros at the triangle ends (measured: all four banks bit-identical). The float64 values are held to float32 rounding of the
// fixture (2^-24 relative). A misplaced band edge, a wrong mel formula or a missing norm changes weights by >= 1e-3.
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { SafetensorsFile, setDefaultDevice, ShapeError } from '../../src/index.js';
import { expectClose, takeValues } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const FIXTURE = join(import.meta.dirname, '..', 'fixtures', 'audio', 'mel-filters.safetensors');
const TOL = { atol: 1e-8, rtol: 1e-6 };
/** float64 values against their float32 rounding: half an ulp (2^-24 relative) plus the subnormal-free zeros. */
const F32_ROUNDING = { atol: 1e-12, rtol: 2 ** -24 };

const CASES: { name: string; options: tg.MelFilterbankOptions; shape: [number, number] }[] = [
  { name: 'slaney_80', options: { sampleRate: 16000, nFft: 400, nMels: 80, fMin: 0, fMax: 8000 }, shape: [80, 201] },
  { name: 'slaney_128', options: { sampleRate: 16000, nFft: 400, nMels: 128, fMin: 0, fMax: 8000 }, shape: [128, 201] },
  { name: 'htk_none_40', options: { sampleRate: 22050, nFft: 1024, nMels: 40, fMin: 20, fMax: 8000, melScale: 'htk', norm: null }, shape: [40, 513] },
  { name: 'slaney_64_default_fmax', options: { sampleRate: 22050, nFft: 512, nMels: 64 }, shape: [64, 257] },
];

describe('melFilterbank vs the librosa numpy reference', () => {
  const fixture = new Map<string, { values: Float32Array; shape: number[] }>();
  let metadata: Record<string, string> = {};

  beforeAll(async () => {
    const file = await SafetensorsFile.open(FIXTURE);
    try {
      metadata = { ...file.metadata };
      for (const name of file.names) {
        const t = await file.load(name, { device: 'cpu' });
        const shape = [...t.shape];
        fixture.set(name, { values: await takeValues(t), shape });
      }
    } finally {
      await file.close();
    }
  });

  it('the fixture holds the four banks', () => {
    expect([...fixture.keys()].sort()).toEqual(CASES.map((c) => c.name).sort());
    expect(metadata.htk_none_40).toBe('sr=22050 n_fft=1024 n_mels=40 fmin=20 fmax=8000 htk=True norm=None');
    expect(metadata.slaney_64_default_fmax).toContain('fmax=None(11025)');
  });

  it.each(CASES.map((c) => [c.name, c] as const))('%s', async (name, c) => {
    const want = fixture.get(name)!;
    expect(want.shape).toEqual(c.shape);
    const t = tg.melFilterbank(c.options);
    expect(t.shape).toEqual(c.shape);
    expect(t.dtype).toBe('float32');
    expect(t.device).toBe('cpu');
    const got = await takeValues(t);
    expectClose(got, want.values, TOL, name);
    let worst = 0;
    for (let i = 0; i < got.length; i++) worst = Math.max(worst, Math.abs(got[i] - want.values[i]) / Math.max(Math.abs(want.values[i]), 1e-30));
    console.log(`mel filterbank ${name}: max rel diff vs fixture ${worst.toExponential(2)}`);
    // The float64 weights round to the fixture's float32 values.
    const values = tg.melFilterbankValues(c.options);
    expect(values).toBeInstanceOf(Float64Array);
    expectClose(values, want.values, F32_ROUNDING, `${name} float64`);
    // Triangles are non-negative and every row is non-empty at these sizes.
    for (let m = 0; m < c.shape[0]; m++) {
      const row = got.subarray(m * c.shape[1], (m + 1) * c.shape[1]);
      expect(row.every((v) => v >= 0)).toBe(true);
      expect(Math.max(...row), `row ${m}`).toBeGreaterThan(0);
    }
  });

  it("defaults: nMels 128, fMin 0, fMax sr / 2, melScale 'slaney', norm 'slaney'", async () => {
    const explicit = tg.melFilterbankValues({ sampleRate: 16000, nFft: 400, nMels: 128, fMin: 0, fMax: 8000, melScale: 'slaney', norm: 'slaney' });
    const defaults = tg.melFilterbankValues({ sampleRate: 16000, nFft: 400 });
    expect(defaults).toEqual(explicit);
    // slaney_128 is exactly that bank.
    expectClose(defaults, fixture.get('slaney_128')!.values, F32_ROUNDING, 'defaults vs slaney_128');
  });

  it('norm null leaves peaks <= 1; slaney norm divides each triangle by half its width in Hz', () => {
    const o = { sampleRate: 16000, nFft: 400, nMels: 80, fMax: 8000 };
    const raw = tg.melFilterbankValues({ ...o, norm: null });
    const normed = tg.melFilterbankValues(o);
    expect(Math.max(...raw)).toBeLessThanOrEqual(1 + 1e-12);
    const lo = tg.hzToMel(0);
    const hi = tg.hzToMel(8000);
    const edges = Array.from({ length: 82 }, (_, i) => tg.melToHz(lo + ((hi - lo) * i) / 81));
    for (let m = 0; m < 80; m++) {
      const enorm = 2 / (edges[m + 2] - edges[m]);
      for (let k = 0; k < 201; k++) expect(Math.abs(normed[m * 201 + k] - raw[m * 201 + k] * enorm)).toBeLessThanOrEqual(1e-15);
    }
  });

  it('dtype float32 regardless of the option; device option', async () => {
    const t = tg.melFilterbank({ sampleRate: 16000, nFft: 400, nMels: 10, dtype: 'float16' });
    expect(t.dtype).toBe('float32');
    t.dispose();
    if (gpu.available) {
      const g = tg.melFilterbank({ sampleRate: 16000, nFft: 400, nMels: 10, device: 'webgpu' });
      expect(g.device).toBe('webgpu');
      const c = tg.melFilterbank({ sampleRate: 16000, nFft: 400, nMels: 10 });
      expect(await takeValues(g)).toEqual(await takeValues(c));
    }
  });
});

describe('hzToMel / melToHz', () => {
  it('slaney: linear below 1 kHz (200 Hz = 3 mels, 1000 Hz = 15), logarithmic above (6400 Hz = 42)', () => {
    expect(tg.hzToMel(0)).toBe(0);
    expect(tg.hzToMel(200)).toBeCloseTo(3, 12);
    expect(tg.hzToMel(1000)).toBeCloseTo(15, 12);
    expect(tg.hzToMel(1000, 'slaney')).toBeCloseTo(15, 12);
    expect(tg.hzToMel(6400)).toBeCloseTo(42, 12);
    // log part: 27 mels per factor 6.4
    expect(tg.hzToMel(6400 * 6.4) - tg.hzToMel(6400)).toBeCloseTo(27, 10);
    expect(tg.melToHz(15)).toBeCloseTo(1000, 9);
    expect(tg.melToHz(42)).toBeCloseTo(6400, 9);
    expect(tg.melToHz(3)).toBeCloseTo(200, 12);
  });

  it('htk: 2595 log10(1 + f / 700), so 700 Hz = 2595 log10 2', () => {
    expect(tg.hzToMel(700, 'htk')).toBeCloseTo(2595 * Math.log10(2), 9);
    expect(tg.hzToMel(0, 'htk')).toBe(0);
    expect(tg.hzToMel(6300, 'htk')).toBeCloseTo(2595, 9);
    expect(tg.melToHz(2595, 'htk')).toBeCloseTo(6300, 8);
  });

  it('round trips on both scales', () => {
    for (const scale of ['slaney', 'htk'] as const) {
      for (const f of [0, 50, 999, 999.999, 1000, 1000.001, 1234.5, 8000, 11025, 24000]) {
        expect(Math.abs(tg.melToHz(tg.hzToMel(f, scale), scale) - f), `${scale} ${f} Hz`).toBeLessThanOrEqual(1e-10 + 1e-13 * f);
      }
      for (const m of [0, 1, 14.999, 15, 15.001, 40, 100]) {
        expect(Math.abs(tg.hzToMel(tg.melToHz(m, scale), scale) - m), `${scale} ${m} mels`).toBeLessThanOrEqual(1e-12 * Math.max(1, m));
      }
    }
  });

  it('monotonic and continuous at the slaney break (1 kHz)', () => {
    expect(tg.hzToMel(1000 - 1e-9)).toBeCloseTo(tg.hzToMel(1000), 8);
    expect(tg.melToHz(15 - 1e-9)).toBeCloseTo(tg.melToHz(15), 6);
    let prev = -Infinity;
    for (let f = 0; f <= 12000; f += 37) {
      const m = tg.hzToMel(f);
      expect(m).toBeGreaterThan(prev);
      prev = m;
    }
  });
});

describe('melFilterbank errors', () => {
  const base = { sampleRate: 16000, nFft: 400 };
  const bad: [string, tg.MelFilterbankOptions][] = [
    ['sampleRate 0', { ...base, sampleRate: 0 }],
    ['sampleRate -1', { ...base, sampleRate: -16000 }],
    ['sampleRate NaN', { ...base, sampleRate: NaN }],
    ['nFft 0', { ...base, nFft: 0 }],
    ['nFft 400.5', { ...base, nFft: 400.5 }],
    ['nMels 0', { ...base, nMels: 0 }],
    ['nMels 2.5', { ...base, nMels: 2.5 }],
    ['fMin < 0', { ...base, fMin: -1 }],
    ['fMax = fMin', { ...base, fMin: 1000, fMax: 1000 }],
    ['fMax < fMin', { ...base, fMin: 2000, fMax: 1000 }],
    ['melScale unknown', { ...base, melScale: 'bark' as tg.MelScale }],
    ['norm unknown', { ...base, norm: 'l2' as 'slaney' }],
  ];
  it.each(bad)('%s throws ShapeError', (_, options) => {
    expect(() => tg.melFilterbankValues(options)).toThrow(ShapeError);
    expect(() => tg.melFilterbank(options)).toThrow(ShapeError);
  });
});
