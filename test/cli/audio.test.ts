// `tensorgpu audio mel | spectrogram` end to end: the built-in signal on WebGPU (3 dispatches for the log-mel, a
// PNG of the feature's size, --save holding exactly the features logMelSpectrogram computes), a 44.1 kHz stereo WAV
// (mixed to mono and resampled to 16 kHz first, the same features as doing that by hand), the plain spectrogram on
// the CPU, and a malformed WAV as an AudioFormatError naming its offset before any device work.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PNG } from 'pngjs';
import { spectrogramLayout } from '../../src/media/spectrogram-image.js';
import { runAudio } from '../../src/cli/audio.js';
import { AudioFormatError, encodeWav, logMelSpectrogram, resample, SafetensorsFile, setDefaultDevice, syntheticSignal, tensor } from '../../src/index.js';
import { expectClose } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

describe.skipIf(!gpu.available)(`tensorgpu audio ${gpu.skipReason}`, () => {
  let work = '';
  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), 'tensorgpu-audio-cli-'));
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('mel of the built-in signal on WebGPU: 3 dispatches, a PNG of [n mels, frames], --save holds the features', async () => {
    const out = join(work, 'mel.png');
    const save = join(work, 'mel.safetensors');
    const lines: string[] = [];
    const code = await runAudio(
      'mel',
      { out, save, device: 'webgpu', seconds: 2, nMels: 128, scale: 2 },
      (l) => lines.push(l),
      () => {},
    );
    expect(code).toBe(0);
    expect(lines.join('\n')).toMatch(/\[128, 200\] on webgpu/);
    expect(lines.join('\n')).toMatch(/webgpu: 3 dispatches/);
    // The heat map (200 frames x 128 mels at scale 2) inside the axes' margins, as the picture line reports it.
    const png = PNG.sync.read(readFileSync(out));
    const layout = spectrogramLayout(128, 200, { scale: 2, axes: { x: { label: 'time (s)', step: 0.01 }, y: { label: 'mel bin', step: 1 } } });
    expect([layout.map.width, layout.map.height]).toEqual([400, 256]);
    expect([png.width, png.height]).toEqual([layout.width, layout.height]);
    expect(png.width).toBeGreaterThan(400);
    expect(lines.join('\n')).toContain(`(${layout.width}x${layout.height}: a 400x256 heat map with axes, time (s) on x, mel bin on y`);
    const file = await SafetensorsFile.open(save);
    try {
      const saved = await file.load('log_mel', { device: 'cpu' });
      expect(saved.shape).toEqual([128, 200]);
      const want = logMelSpectrogram(tensor(syntheticSignal(2)), { nMels: 128 });
      expectClose(await saved.toArray(), await want.toArray(), { atol: 1e-4, rtol: 0 });
    } finally {
      await file.close();
    }
  }, 120_000);

  it('--compile: the same log-mel bits as eager, traced with no fallback (a 44.1 kHz WAV: the resampler inside)', async () => {
    const path = join(work, 'compile.wav');
    writeFileSync(path, encodeWav([syntheticSignal(1, 44100)], 44100, { bitDepth: '32f' }));
    const features = async (compile: boolean) => {
      const save = join(work, `compile-${compile}.safetensors`);
      const lines: string[] = [];
      expect(
        await runAudio(
          'mel',
          { input: path, out: join(work, 'compile.png'), save, device: 'webgpu', compile },
          (l) => lines.push(l),
          () => {},
        ),
      ).toBe(0);
      const file = await SafetensorsFile.open(save);
      try {
        const t = await file.load('log_mel', { device: 'cpu' });
        return { lines, values: new Uint32Array(((await t.toArray()) as Float32Array).buffer) };
      } finally {
        await file.close();
      }
    };
    const eager = await features(false);
    const compiled = await features(true);
    expect(compiled.values).toEqual(eager.values);
    expect(compiled.lines.at(-1)).toMatch(/^compile: traced \(\d+ ops -> \d+ steps, \d+ fused group\(s\)\): a later call of this length would replay$/);
  }, 120_000);

  it('a 44.1 kHz stereo WAV is mixed to mono and resampled to 16 kHz before the log-mel', async () => {
    const mono = syntheticSignal(1, 44100);
    const left = mono.map((v) => v * 0.5);
    const right = mono.map((v) => v * 0.25);
    const path = join(work, 'stereo.wav');
    writeFileSync(path, encodeWav([left, right], 44100, { bitDepth: '32f' }));
    const save = join(work, 'stereo.safetensors');
    const lines: string[] = [];
    expect(
      await runAudio(
        'mel',
        { input: path, out: join(work, 'stereo.png'), save, device: 'webgpu' },
        (l) => lines.push(l),
        () => {},
      ),
    ).toBe(0);
    expect(lines[0]).toMatch(/2 channels mixed to mono, 32f-bit, 44100 Hz/);
    const file = await SafetensorsFile.open(save);
    try {
      const saved = await file.load('log_mel', { device: 'cpu' });
      const want = logMelSpectrogram(resample(tensor(mono.map((v) => v * 0.375)), 44100, 16000));
      expect(saved.shape).toEqual(want.shape);
      expectClose(await saved.toArray(), await want.toArray(), { atol: 1e-4, rtol: 0 });
    } finally {
      await file.close();
    }
  }, 120_000);

  it('spectrogram on the CPU: [n_fft / 2 + 1, frames] in dB within an 80 dB range', async () => {
    const out = join(work, 'spec.png');
    const save = join(work, 'spec.safetensors');
    const lines: string[] = [];
    expect(
      await runAudio(
        'spectrogram',
        { out, save, device: 'cpu', seconds: 1, nFft: 256, hop: 64 },
        (l) => lines.push(l),
        () => {},
      ),
    ).toBe(0);
    const png = PNG.sync.read(readFileSync(out));
    const layout = spectrogramLayout(129, 251, { axes: { x: { label: 'time (s)', step: 64 / 16000 }, y: { label: 'frequency (Hz)', step: 16000 / 256 } } });
    expect([layout.map.width, layout.map.height]).toEqual([251, 129]);
    expect([png.width, png.height]).toEqual([layout.width, layout.height]);
    expect(lines.join('\n')).toContain('frequency (Hz) on y');
    const file = await SafetensorsFile.open(save);
    try {
      const db = (await (await file.load('spectrogram_db', { device: 'cpu' })).toArray()) as Float32Array;
      const max = db.reduce((a, b) => Math.max(a, b), -Infinity);
      const min = db.reduce((a, b) => Math.min(a, b), Infinity);
      expect(max - min).toBeLessThanOrEqual(80 + 1e-3);
      expect(max - min).toBeGreaterThan(40);
    } finally {
      await file.close();
    }
  }, 60_000);

  it('a truncated WAV is an AudioFormatError naming the chunk and offset', async () => {
    const bytes = encodeWav(syntheticSignal(0.1), 16000);
    const path = join(work, 'cut.wav');
    writeFileSync(path, bytes.subarray(0, bytes.length - 100));
    const err = await runAudio(
      'mel',
      { input: path, out: join(work, 'cut.png'), device: 'cpu' },
      () => {},
      () => {},
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AudioFormatError);
    expect(String((err as Error).message)).toMatch(/data.*byte 36|byte 36.*data/);
  });
});
