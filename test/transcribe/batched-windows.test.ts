// Batched encoder windows (issue 39): encodeWindows over B windows gives each window the rows encode() gives it
// alone (CPU and WebGPU), in the encoder dispatches of one window (plus one); transcribe() with batchWindows > 1 gives the
// same transcript as one window at a time, without timestamps (fixed 30 s strides: every window of a batch is
// used) and with them (a batch is speculative: a window is used only when seeking lands on its start), with and
// without language detection; a seek between a batch's window starts drops the batch and encodes from there. A tiny random Whisper with 2 s windows (100 encoder positions), 5 s of audio: 3 windows.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gpuCounters, memoryStats, syntheticSignal, synchronize, tensor, type Tensor } from '../../src/index.js';
import { loadWhisper, type LoadedWhisper } from '../../src/models/whisper/load.js';
import { WHISPER_PRESETS } from '../../src/models/whisper/presets.js';
import { writeRandomWhisperCheckpoint } from '../../src/models/whisper/random-checkpoint.js';
import { whisperTokenizerFiles } from '../../src/models/whisper/tokenizer-files.js';
import { transcribe, type TranscribeOptions } from '../../src/transcribe/transcribe.js';
import { WindowBatches } from '../../src/transcribe/window-batches.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
const devices = ['cpu', ...(gpu.available ? ['webgpu' as const] : [])] as const;

const CONFIG = { ...WHISPER_PRESETS['whisper-tiny'], maxSourcePositions: 100, encoderLayers: 2, decoderLayers: 1 };
const FRAMES = 2 * CONFIG.maxSourcePositions;
const AUDIO = syntheticSignal(5, 16000);

let dir = '';
const loaded = new Map<string, LoadedWhisper>();
async function load(device: 'cpu' | 'webgpu'): Promise<LoadedWhisper> {
  if (!loaded.has(device)) loaded.set(device, await loadWhisper(dir, { device }));
  return loaded.get(device)!;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tensorgpu-whisper-batch-'));
  await writeRandomWhisperCheckpoint(dir, CONFIG, { seed: 9, extraFiles: await whisperTokenizerFiles() });
});
afterAll(() => {
  for (const { model } of loaded.values()) model.dispose();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Three windows of features [3, nMels, FRAMES] (random, like log-mel values). */
function windows(device: 'cpu' | 'webgpu'): Tensor {
  const n = 3 * CONFIG.numMelBins * FRAMES;
  const values = Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37) * Math.cos(i * 0.011));
  return tensor(values, { device }).reshape([3, CONFIG.numMelBins, FRAMES]);
}

describe(`Whisper encoder over batched windows ${gpu.skipReason}`, () => {
  it.each(devices)(
    '%s: encodeWindows gives each window the rows encode gives it alone',
    async (device) => {
      const { model } = await load(device);
      const x = windows(device);
      const d0 = gpuCounters().dispatches;
      const batched = model.encodeWindows(x);
      const got = (await batched.toArray()) as Float32Array;
      const batchedDispatches = gpuCounters().dispatches - d0;
      expect(batched.shape).toEqual([3, CONFIG.maxSourcePositions, CONFIG.dModel]);
      batched.dispose();
      const rows = CONFIG.maxSourcePositions * CONFIG.dModel;
      let oneByOne = 0;
      for (let w = 0; w < 3; w++) {
        const xw = x.narrow(0, w, 1);
        const d1 = gpuCounters().dispatches;
        const alone = model.encode(xw);
        const want = (await alone.toArray()) as Float32Array;
        oneByOne += gpuCounters().dispatches - d1;
        alone.dispose();
        xw.dispose();
        let worst = 0;
        let scale = 0;
        for (let i = 0; i < rows; i++) {
          worst = Math.max(worst, Math.abs(got[w * rows + i] - want[i]));
          scale = Math.max(scale, Math.abs(want[i]));
        }
        expect(worst / scale, `${device} window ${w}`).toBeLessThan(device === 'cpu' ? 1e-7 : 1e-5);
      }
      x.dispose();
      if (device === 'webgpu') {
        await synchronize();
        console.log(`encoder dispatches: 3 windows batched ${batchedDispatches}, one by one ${oneByOne}`);
        // Every op, attention included, runs once over the three windows: one window's dispatches and the final
        // reorder of the rows (position-major inside, window-major out).
        expect(batchedDispatches).toBeLessThanOrEqual(oneByOne / 3 + 1);
      }
    },
    180_000,
  );
});

describe(`transcribe with batched encoder windows ${gpu.skipReason}`, () => {
  const base: TranscribeOptions = { temperature: 0, sampleLen: 4, noSpeechThreshold: null, compressionRatioThreshold: null, logprobThreshold: null };
  const cases: [string, TranscribeOptions][] = [
    ['without timestamps', { ...base, language: 'en', withoutTimestamps: true }],
    ['with timestamps (speculative batch)', { ...base, language: 'en' }],
    ['language detection on the first window', { ...base, withoutTimestamps: true }],
  ];
  // WebGPU: the fixed-stride case only (the seeking logic is the host's; SwiftShader runs the rest slowly).
  const runs = [...cases.map(([name, o]) => ['cpu', name, o] as const), ...(gpu.available ? [['webgpu', cases[0][0], cases[0][1]] as const] : [])];
  it.each(runs)(
    '%s, %s: the same transcript as one window at a time',
    async (device, _, options) => {
      const { model, tokenizer } = await load(device);
      const one = await transcribe(model, tokenizer, AUDIO, { ...options, batchWindows: 1 });
      const live = memoryStats().liveBytes;
      const batched = await transcribe(model, tokenizer, AUDIO, { ...options, batchWindows: 3 });
      // The batches and the views of their rows are released (the first run above allocated what stays).
      if (device === 'webgpu') expect(memoryStats().liveBytes).toBe(live);
      expect(batched.segments).toEqual(one.segments);
      expect([batched.text, batched.language]).toEqual([one.text, one.language]);
      expect(batched.stats.windows).toBe(one.stats.windows);
      expect(one.stats.encoderPasses).toBe(one.stats.windows);
      if (options.withoutTimestamps) {
        // Every window at a fixed stride: 3 windows of content in one encoder pass.
        expect(one.segments.map((s) => s.seek)).toEqual([0, FRAMES, 2 * FRAMES]);
        expect(batched.stats.encoderPasses).toBe(1);
      } else expect(batched.stats.encoderPasses).toBeLessThanOrEqual(one.stats.encoderPasses);
    },
    180_000,
  );

  it('batchWindows must be a positive integer; the default batches only without timestamps', async () => {
    const { model, tokenizer } = await load('cpu');
    await expect(transcribe(model, tokenizer, AUDIO, { ...base, language: 'en', batchWindows: 0 })).rejects.toThrow(
      /batchWindows must be an integer >= 1, got 0/,
    );
    const plain = await transcribe(model, tokenizer, AUDIO, { ...base, language: 'en', withoutTimestamps: true });
    expect(plain.stats.encoderPasses).toBe(1);
    const timed = await transcribe(model, tokenizer, AUDIO, { ...base, language: 'en' });
    expect(timed.stats.encoderPasses).toBe(timed.stats.windows);
  });
});

describe('WindowBatches: speculative windows at fixed strides', () => {
  it('a seek on a batched start uses its row; a seek between starts encodes a new batch from there', async () => {
    const calls: number[][] = [];
    // A stand-in encoder: each window's "output" [1, 1] holds its start.
    const batches = new WindowBatches(
      (seeks) => {
        calls.push([...seeks]);
        return tensor(Float32Array.from(seeks), { device: 'cpu' }).reshape([seeks.length, 1, 1]);
      },
      3,
      200,
      900,
    );
    const used: number[] = [];
    for (const seek of [0, 200, 350, 550, 750, 800]) {
      const row = batches.at(seek);
      expect(row.shape).toEqual([1, 1]);
      used.push((await row.toArray())[0]);
      row.dispose();
    }
    batches.dispose();
    expect(used).toEqual([0, 200, 350, 550, 750, 800]);
    expect(calls).toEqual([[0, 200, 400], [350, 550, 750], [800]]);
    expect(() => new WindowBatches(() => tensor([0]), 1.5, 200, 900)).toThrow(/batchWindows must be an integer >= 1, got 1.5/);
  });
});
