// Whisper with its projections quantized at load (`loadWhisper(..., { dtype: 'fp8' | 'int4' })`,
// `tensorgpu transcribe --dtype`): a tiny random checkpoint whose every projection is quantized (dims that int4
// groups of 32 divide, several groups per row; one layer each and one FFN width, so SwiftShader compiles few
// pipelines), its logits near the float32 model's on the CPU, WebGPU matching the CPU for the same quantized model,
// greedy decoding through the (captured) cache, and the CLI flag end to end.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runTranscribe } from '../../src/cli/transcribe.js';
import { encodeWav, syntheticSignal } from '../../src/index.js';
import { DTYPE_INFO } from '../../src/core/dtype.js';
import { Checkpoint } from '../../src/formats/checkpoint.js';
import type { WhisperConfig } from '../../src/models/whisper/config.js';
import { whisperFromCheckpoint, type WhisperWeightDType } from '../../src/models/whisper/load.js';
import type { WhisperModel } from '../../src/models/whisper/model.js';
import { WHISPER_PRESETS } from '../../src/models/whisper/presets.js';
import { writeRandomWhisperCheckpoint } from '../../src/models/whisper/random-checkpoint.js';
import { WhisperSession } from '../../src/models/whisper/session.js';
import { whisperTokenizerFiles } from '../../src/models/whisper/tokenizer-files.js';
import type { LinearWeights } from '../../src/models/whisper/weights.js';
import { tensor } from '../../src/ops/creation.js';
import { referenceFeatures } from '../../tools/whisper-reference/presets.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();

const CONFIG: WhisperConfig = {
  modelType: 'whisper',
  vocabSize: 96,
  numMelBins: 16,
  dModel: 64,
  encoderLayers: 1,
  decoderLayers: 1,
  encoderAttentionHeads: 4,
  decoderAttentionHeads: 4,
  encoderFfnDim: 128,
  decoderFfnDim: 128,
  maxSourcePositions: 12,
  maxTargetPositions: 24,
  activationFunction: 'gelu',
  scaleEmbedding: false,
  tieWordEmbeddings: true,
  padTokenId: 80,
  bosTokenId: 80,
  eosTokenId: 80,
  decoderStartTokenId: 81,
  suppressTokens: [],
  beginSuppressTokens: [5, 80],
  torchDtype: 'float32',
};
const IDS = [81, 82, 90, 17, 3, 44];
const GROUP = 32;

/**
 * ||got - want|| / ||want|| over the logits. Measured on this checkpoint (uniform random weights, every projection
 * quantized): fp8 3.5e-2, int4 in groups of 32 7.0e-2 on the CPU; the bounds leave about 2x. A wrong scale or zero
 * point lands far above them; the weight checks catch a projection left float.
 */
const REL_BOUND: Record<'fp8' | 'int4', number> = { fp8: 7e-2, int4: 1.5e-1 };
const measured: Partial<Record<'fp8' | 'int4', number>> = {};

function relError(got: ArrayLike<number>, want: ArrayLike<number>): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < want.length; i++) {
    num += (got[i] - want[i]) ** 2;
    den += want[i] ** 2;
  }
  return Math.sqrt(num / den);
}

const argmax = (row: ArrayLike<number>) => {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  return best;
};

function projections(m: WhisperModel): [string, LinearWeights][] {
  const w = m.weights;
  return [
    ...w.encoderLayers.flatMap((l, i) =>
      Object.entries({ q: l.q, k: l.k, v: l.v, out: l.out, fc1: l.fc1, fc2: l.fc2 }).map(([n, x]) => [`enc${i}.${n}`, x] as [string, LinearWeights]),
    ),
    ...w.decoderLayers.flatMap((l, i) =>
      Object.entries({ qkv: l.qkv, selfOut: l.selfOut, crossQ: l.crossQ, crossKv: l.crossKv, crossOut: l.crossOut, fc1: l.fc1, fc2: l.fc2 }).map(
        ([n, x]) => [`dec${i}.${n}`, x] as [string, LinearWeights],
      ),
    ),
  ];
}

const weightBytes = (m: WhisperModel) => m.weightTensors().reduce((s, t) => s + t.numel * DTYPE_INFO[t.dtype].itemBytes, 0);

describe('Whisper with FP8 / int4 projections', () => {
  let dir = '';
  const models = new Map<string, WhisperModel>();
  const features = (device: 'cpu' | 'webgpu') => tensor(referenceFeatures(CONFIG), { device }).reshape([1, CONFIG.numMelBins, 2 * CONFIG.maxSourcePositions]);
  const load = async (device: 'cpu' | 'webgpu', dtype?: WhisperWeightDType) => {
    await using ck = await Checkpoint.open(dir);
    const m = await whisperFromCheckpoint(ck, { device, dtype, groupSize: dtype === 'int4' ? GROUP : undefined });
    models.set(`${device}:${dtype ?? 'float32'}`, m);
    return m;
  };
  const logitsOf = async (m: WhisperModel, device: 'cpu' | 'webgpu') => {
    const x = features(device);
    const logits = m.forward(x, IDS);
    x.dispose();
    const v = await logits.toArray();
    logits.dispose();
    return v;
  };
  /** Every prompt position's logits (prefill through the cache), then `steps` greedy tokens (captured on WebGPU). */
  const greedy = async (m: WhisperModel, device: 'cpu' | 'webgpu', steps: number) => {
    const session = new WhisperSession(m, { capture: true });
    const x = features(device);
    session.setFeatures(x);
    x.dispose();
    const prompt = await session.prefill(
      IDS,
      IDS.map((_, i) => i),
    );
    const rows: Float32Array[] = [];
    let row = prompt[prompt.length - 1];
    for (let i = 0; i < steps; i++) {
      rows.push(row);
      if (i + 1 < steps) row = await session.next(argmax(row));
    }
    const stats = { ...session.stats };
    session.dispose();
    return { prompt: prompt.flatMap((r) => Array.from(r)), tokens: rows.map(argmax), rows, stats };
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tensorgpu-whisper-quant-'));
    await writeRandomWhisperCheckpoint(dir, CONFIG, { dtype: 'float32', seed: 5 });
    await load('cpu');
  });

  afterAll(() => {
    for (const m of models.values()) m.dispose();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('fp8: every projection is FP8 with block scales (convs, embeddings and positions stay float32); logits near float32', async () => {
    const m = await load('cpu', 'fp8');
    for (const [name, l] of projections(m)) {
      expect(l.weight.dtype, name).toBe('float8_e4m3fn');
      expect(l.quant?.weightScale?.dtype, name).toBe('float32');
      expect(l.quant?.recipe, name).toBe('block');
    }
    for (const t of [m.weights.conv1.weight, m.weights.conv2.weight, m.weights.embedTokens, m.weights.encoderPositions]) expect(t.dtype).toBe('float32');
    const float = models.get('cpu:float32')!;
    expect(weightBytes(m)).toBeLessThan(weightBytes(float));
    const err = relError(await logitsOf(m, 'cpu'), await logitsOf(float, 'cpu'));
    console.log(`fp8 logits vs float32: rel ${err.toExponential(2)}`);
    expect(err).toBeGreaterThan(0);
    expect(err).toBeLessThan(REL_BOUND.fp8);
    measured.fp8 = err;
  });

  it('int4: every projection is packed 4-bit in groups of 32 along K; logits near float32', async () => {
    const m = await load('cpu', 'int4');
    for (const [name, l] of projections(m)) {
      expect(l.weight.dtype, name).toBe('int32');
      const q = l.quant?.int4;
      expect(q?.groupSize, name).toBe(GROUP);
      const k = l.weight.shape[1] * 8;
      expect(l.quant?.weightScale?.shape, name).toEqual([l.weight.shape[0], k / GROUP]);
      expect(q?.zero.shape, name).toEqual([l.weight.shape[0], k / GROUP]);
    }
    expect(m.weights.decoderLayers[0].qkv.weight.shape).toEqual([3 * CONFIG.dModel, CONFIG.dModel / 8]);
    expect(m.weights.decoderLayers[0].crossKv.weight.shape).toEqual([2 * CONFIG.dModel, CONFIG.dModel / 8]);
    const float = models.get('cpu:float32')!;
    expect(weightBytes(m)).toBeLessThan(weightBytes(models.get('cpu:fp8') ?? float));
    const err = relError(await logitsOf(m, 'cpu'), await logitsOf(float, 'cpu'));
    console.log(`int4 logits vs float32: rel ${err.toExponential(2)}`);
    expect(err).toBeGreaterThan(0);
    expect(err).toBeLessThan(REL_BOUND.int4);
    // 16 levels per group are coarser than e4m3's 3 mantissa bits with a block scale
    if (measured.fp8 !== undefined) expect(err).toBeGreaterThan(measured.fp8);
  });

  it('CPU: greedy decoding of the quantized models runs through the cache', async () => {
    for (const dtype of ['fp8', 'int4'] as const) {
      const m = models.get(`cpu:${dtype}`) ?? (await load('cpu', dtype));
      const { tokens, rows } = await greedy(m, 'cpu', 4);
      expect(tokens).toHaveLength(4);
      for (const r of rows) expect(r.every(Number.isFinite)).toBe(true);
    }
  });

  it.skipIf(!gpu.available)(`WebGPU matches the CPU for the same quantized model (prompt logits and captured greedy steps) ${gpu.skipReason}`, async () => {
    for (const dtype of ['fp8', 'int4'] as const) {
      const cpu = models.get(`cpu:${dtype}`) ?? (await load('cpu', dtype));
      const webgpu = await load('webgpu', dtype);
      expect(webgpu.weights.decoderLayers[0].fc1.weight.dtype).toBe(dtype === 'fp8' ? 'float8_e4m3fn' : 'int32');
      const a = await greedy(cpu, 'cpu', 4);
      const b = await greedy(webgpu, 'webgpu', 4);
      const err = relError(b.prompt, a.prompt);
      console.log(`${dtype} WebGPU vs CPU prompt logits: rel ${err.toExponential(2)}`);
      expect(err).toBeLessThan(1e-3);
      expect(b.tokens).toEqual(a.tokens);
      for (let i = 0; i < a.rows.length; i++) expect(relError(b.rows[i], a.rows[i]), `${dtype} step ${i}`).toBeLessThan(1e-3);
      expect(b.stats.mode).toBe('replay');
    }
  });

  it('tensorgpu transcribe --dtype int4 --group-size 32 runs (and --group-size without int4 is refused)', async () => {
    // The preset's vocabulary and tokenizer (the CLI needs tokenizer.json), one layer each, 2 s windows.
    const cliModel = join(dir, 'cli');
    await writeRandomWhisperCheckpoint(
      cliModel,
      { ...WHISPER_PRESETS['whisper-tiny'], maxSourcePositions: 100, encoderLayers: 1, decoderLayers: 1 },
      { seed: 3, extraFiles: await whisperTokenizerFiles() },
    );
    const wav = join(dir, 'speech.wav');
    writeFileSync(wav, encodeWav([syntheticSignal(1, 16000)], 16000, { bitDepth: '16' }));
    const log: string[] = [];
    const code = await runTranscribe(
      { input: wav, model: cliModel, device: 'cpu', language: 'en', temperature: '0', maxTokens: 4, dtype: 'int4', groupSize: 32, outputFormat: 'json' },
      () => {},
      (l) => log.push(l),
    );
    expect(code).toBe(0);
    expect(log.join('\n')).toMatch(/int4 projections/);
    await expect(
      runTranscribe(
        { input: wav, model: cliModel, device: 'cpu', groupSize: 32 },
        () => {},
        () => {},
      ),
    ).rejects.toThrow(/--group-size/);
  }, 60_000);
});
