// Whisper against an independent golden reference: test/fixtures/whisper/<case>.safetensors hold the features, the
// decoder ids and the outputs of a float64 numpy port of transformers' WhisperForConditionalGeneration
// (tools/whisper-reference/whisper_reference.py), run on the float32 random checkpoint writeRandomWhisperCheckpoint
// produces for the same case (tools/whisper-reference/presets.ts) and seed. Regenerate with:
//   npx tsx tools/whisper-reference/make-inputs.ts && python3 tools/whisper-reference/whisper_reference.py
// Covered: the encoder output, every decoder position's logits (tied and untied proj_out, exact and tanh GELU,
// different head counts), the greedy continuation through the KV cache (the port recomputes the whole sequence each
// step), WebGPU against the CPU, and the captured decode step against eager steps.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Checkpoint } from '../../src/formats/checkpoint.js';
import { SafetensorsFile } from '../../src/formats/safetensors-reader.js';
import { whisperFromCheckpoint } from '../../src/models/whisper/load.js';
import type { WhisperModel } from '../../src/models/whisper/model.js';
import { writeRandomWhisperCheckpoint } from '../../src/models/whisper/random-checkpoint.js';
import { WhisperSession } from '../../src/models/whisper/session.js';
import { tensor } from '../../src/ops/creation.js';
import { referenceFeatures, WHISPER_REFERENCE_CASES } from '../../tools/whisper-reference/presets.js';
import { expectClose } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'whisper');

/** float32 on the CPU against float64: measured max abs errors are ~1e-6 on logits up to ~20. */
const MAX_ABS = 1e-5;

function maxAbsDiff(got: ArrayLike<number>, want: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < want.length; i++) {
    const d = Math.abs(got[i] - want[i]);
    if (!(d <= m)) m = Number.isNaN(d) ? Infinity : d;
  }
  return m;
}

const argmax = (row: ArrayLike<number>) => {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  return best;
};

describe.each(Object.keys(WHISPER_REFERENCE_CASES))('%s vs the transformers numpy reference', (name) => {
  const c = WHISPER_REFERENCE_CASES[name];
  let dir: string;
  let models: { cpu?: WhisperModel; webgpu?: WhisperModel } = {};
  let fixture: SafetensorsFile;
  const read = async (key: string) => {
    const t = await fixture.load(key, { device: 'cpu' });
    const v = await t.toArray();
    t.dispose();
    return v;
  };
  const features = (device: 'cpu' | 'webgpu') =>
    tensor(referenceFeatures(c.config), { device }).reshape([1, c.config.numMelBins, 2 * c.config.maxSourcePositions]);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), `tensorgpu-whisper-ref-${name}-`));
    await writeRandomWhisperCheckpoint(dir, c.config, { dtype: 'float32', seed: 1 });
    await using ck = await Checkpoint.open(dir);
    models = { cpu: await whisperFromCheckpoint(ck, { device: 'cpu' }) };
    if (gpu.available) models.webgpu = await whisperFromCheckpoint(ck, { device: 'webgpu' });
    fixture = await SafetensorsFile.open(join(FIXTURES, `${name}.safetensors`));
  });

  afterAll(async () => {
    models.cpu?.dispose();
    models.webgpu?.dispose();
    await fixture?.[Symbol.asyncDispose]();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('the fixture is this case (same features and ids)', async () => {
    expect(Array.from(await read('decoder_input_ids'))).toEqual(c.decoderInputIds);
    expect(maxAbsDiff(await read('features'), referenceFeatures(c.config))).toBe(0);
  });

  it('CPU: the encoder output and the logits of every decoder position match', async () => {
    const model = models.cpu!;
    const x = features('cpu');
    const encoded = model.encode(x);
    const encErr = maxAbsDiff(await encoded.toArray(), await read('encoder_hidden'));
    encoded.dispose();
    const logits = model.forward(x, c.decoderInputIds);
    expect(logits.shape).toEqual([c.decoderInputIds.length, c.config.vocabSize]);
    const err = maxAbsDiff(await logits.toArray(), await read('logits'));
    logits.dispose();
    x.dispose();
    const report = `${name}: encoder max abs ${encErr.toExponential(2)}, logits max abs ${err.toExponential(2)}`;
    console.log(report);
    expect(encErr, report).toBeLessThan(MAX_ABS);
    expect(err, report).toBeLessThan(MAX_ABS);
  });

  const greedy = async (device: 'cpu' | 'webgpu', capture: boolean) => {
    const session = new WhisperSession(models[device]!, { capture });
    const x = features(device);
    session.setFeatures(x);
    x.dispose();
    const rows: Float32Array[] = [];
    let row = (await session.prefill(c.decoderInputIds))[0];
    for (let step = 0; step < c.greedySteps; step++) {
      rows.push(row);
      if (step + 1 < c.greedySteps) row = await session.next(argmax(row));
    }
    const stats = { ...session.stats };
    session.dispose();
    return { tokens: rows.map(argmax), logits: rows, stats };
  };

  it('CPU: greedy decoding through the cache matches the whole-sequence reference', async () => {
    const { tokens, logits } = await greedy('cpu', false);
    const want = await read('greedy_logits');
    const v = c.config.vocabSize;
    const err = Math.max(...logits.map((row, i) => maxAbsDiff(row, want.subarray(i * v, (i + 1) * v))));
    console.log(`${name} greedy logits: max abs ${err.toExponential(2)}`);
    expect(tokens).toEqual(Array.from(await read('greedy')));
    expect(err).toBeLessThan(MAX_ABS);
  });

  it.skipIf(!gpu.available)(`WebGPU matches the CPU (forward and cached greedy, captured and eager) ${gpu.skipReason}`, async () => {
    const x = features('webgpu');
    const logits = models.webgpu!.forward(x, c.decoderInputIds);
    x.dispose();
    expectClose(await logits.toArray(), await read('logits'), { atol: 1e-4, rtol: 1e-4 }, 'webgpu logits vs reference');
    logits.dispose();
    const cpu = await greedy('cpu', false);
    const eager = await greedy('webgpu', false);
    const replay = await greedy('webgpu', true);
    expect(eager.tokens).toEqual(cpu.tokens);
    expect(replay.tokens).toEqual(cpu.tokens);
    for (let i = 0; i < cpu.logits.length; i++) {
      expectClose(eager.logits[i], cpu.logits[i], { atol: 1e-4, rtol: 1e-4 }, `eager step ${i}`);
      expectClose(replay.logits[i], eager.logits[i], { atol: 0, rtol: 0 }, `replayed step ${i} vs eager`);
    }
    expect(replay.stats.mode).toBe('replay');
    expect(replay.stats.replayedSteps).toBe(c.greedySteps - 2);
    expect(replay.stats.capturedDispatches).toBeGreaterThan(0);
  });
});
