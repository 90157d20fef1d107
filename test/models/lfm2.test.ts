// LFM2 / LFM2-MoE end to end on both devices: a prefill followed by decode steps equals one prefill of the whole
// sequence (prompts of 1, 2, 3 and more tokens, so the conv state's order and length are exercised from its zero
// start), WebGPU matches the CPU, captured decode steps replay the eager ones bit for bit, an MoE layer takes no
// more dispatches than Qwen3-MoE's, FP8 works, and bad checkpoints are typed errors naming the field or tensor.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryStats, setDefaultDevice, synchronize, type Tensor } from '../../src/index.js';
import { CheckpointError } from '../../src/core/errors.js';
import { DecodeSession } from '../../src/generate/decode-session.js';
import { measureDecode } from '../../src/generate/measure.js';
import { writeCheckpoint } from '../../src/formats/checkpoint-writer.js';
import { lfm2ToHfConfig, type Lfm2Config } from '../../src/models/lfm2/config.js';
import { lfm2WeightSpecs } from '../../src/models/lfm2/layout.js';
import { Lfm2Model } from '../../src/models/lfm2/model.js';
import { writeRandomLfm2Checkpoint } from '../../src/models/lfm2/random-checkpoint.js';
import { loadModel, type LoadedModel } from '../../src/models/load.js';
import { loadQwen3 } from '../../src/models/qwen3/load.js';
import { randomSources } from '../../src/models/random-weights.js';
import { tensor } from '../../src/ops/creation.js';
import { LFM2_REFERENCE_CASES } from '../../tools/lfm2-reference/presets.js';
import { expectClose } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const MOE = LFM2_REFERENCE_CASES['lfm2-moe-ref'].config;
const DENSE = LFM2_REFERENCE_CASES['lfm2-ref'].config;
const SEQUENCE = [3, 17, 42, 5, 88, 1, 60, 200, 9];
const devices = ['cpu', ...(gpu.available ? ['webgpu' as const] : [])] as const;

const dirs: Record<string, string> = {};
const loaded: LoadedModel[] = [];

async function open(name: string, device: 'cpu' | 'webgpu', options: { dtype?: 'fp8'; maxSequence?: number } = {}): Promise<Lfm2Model> {
  const m = await loadModel(dirs[name], { device, maxSequence: options.maxSequence ?? 32, dtype: options.dtype });
  loaded.push(m);
  expect(m.model).toBeInstanceOf(Lfm2Model);
  return m.model as Lfm2Model;
}

async function rows(model: Lfm2Model, ids: readonly number[], cache = model.newCache(), lastOnly = false): Promise<Float32Array> {
  const logits: Tensor = await model.forward(tensor([...ids], { dtype: 'int32', device: model.device }), cache, { lastOnly });
  const out = (await logits.toArray()) as Float32Array;
  logits.dispose();
  return out;
}

beforeAll(async () => {
  for (const [name, config] of [
    ['moe', MOE],
    ['dense', DENSE],
  ] as const) {
    dirs[name] = mkdtempSync(join(tmpdir(), `tensorgpu-lfm2-${name}-`));
    await writeRandomLfm2Checkpoint(dirs[name], config, { dtype: 'float32', seed: 5 });
  }
});

afterAll(() => {
  for (const m of loaded) m.model.dispose();
  for (const d of Object.values(dirs)) rmSync(d, { recursive: true, force: true });
});

describe(`LFM2 forward ${gpu.skipReason}`, () => {
  it.each(['moe', 'dense'])('%s: prefill of 1, 2, 3, 5 tokens then decode steps equals one prefill of the whole sequence', async (name) => {
    const vocab = (name === 'moe' ? MOE : DENSE).vocabSize;
    for (const device of devices) {
      const model = await open(name, device);
      const full = await rows(model, SEQUENCE);
      for (const prompt of [1, 2, 3, 5]) {
        const cache = model.newCache();
        const got = [await rows(model, SEQUENCE.slice(0, prompt), cache, true)];
        for (let t = prompt; t < SEQUENCE.length; t++) got.push(await rows(model, [SEQUENCE[t]], cache, true));
        cache.dispose();
        for (let i = 0; i < got.length; i++) {
          const at = prompt - 1 + i;
          expectClose(got[i], full.subarray(at * vocab, (at + 1) * vocab), { atol: 2e-5, rtol: 2e-5 }, `${device} prompt ${prompt}, position ${at}`);
        }
      }
    }
  });

  it.each(['moe', 'dense'])('%s: WebGPU matches the CPU at every position', async (name) => {
    if (!gpu.available) return;
    const cpu = await rows(await open(name, 'cpu'), SEQUENCE);
    const webgpu = await rows(await open(name, 'webgpu'), SEQUENCE);
    expectClose(webgpu, cpu, { atol: 1e-4, rtol: 1e-4 }, 'webgpu vs cpu');
  });
});

describe(`LFM2 decode sessions ${gpu.skipReason}`, () => {
  it('captured decode steps replay the eager ones bit for bit and greedy tokens match the CPU', async () => {
    const run = async (device: 'cpu' | 'webgpu', capture: boolean) => {
      const model = await open('moe', device);
      const session = new DecodeSession(model, { sampling: { temperature: 0 }, capture, keepLogits: true });
      try {
        const ids = [await session.prefill(SEQUENCE.slice(0, 3), 0)];
        const logits: Float32Array[] = [];
        for (let i = 0; i < 8; i++) {
          ids.push(await session.next(0));
          logits.push((await session.logits!.toArray()) as Float32Array);
        }
        return { ids, logits, stats: { ...session.stats } };
      } finally {
        session.dispose();
      }
    };
    const cpu = await run('cpu', false);
    if (!gpu.available) return;
    const eager = await run('webgpu', false);
    const replay = await run('webgpu', true);
    expect(replay.stats.mode).toBe('replay');
    expect(replay.stats.replayedSteps).toBe(7);
    expect(eager.stats.mode).toBe('eager');
    expect(replay.ids).toEqual(eager.ids);
    for (let i = 0; i < replay.logits.length; i++) expect(Array.from(replay.logits[i]), `step ${i}`).toEqual(Array.from(eager.logits[i]));
    expect(replay.ids).toEqual(cpu.ids);
  });

  it('an LFM2-MoE decode step: no more dispatches per layer than Qwen3-MoE (9), one read per token', async () => {
    if (!gpu.available) return;
    const model = await open('moe', 'webgpu', { maxSequence: 64 });
    const m = await measureDecode(model, { promptTokens: 4, decodeSteps: 3 });
    expect(m.mode).toBe('replay');
    expect(m.readsPerToken).toBe(1);
    // conv + MoE layers take 8 (norm, in_proj, conv, out_proj; norm, router, gate|up, down), attention + MoE 9.
    expect(m.dispatchesPerLayer).toBeLessThanOrEqual(9);
    // The forward, the sampler, and the copy of the sampled id into the next step's input.
    expect(m.dispatchesPerToken).toBe(model.lastForward.dispatches + 2);
  });
});

describe(`LFM2 memory ${gpu.skipReason}`, () => {
  it('fused, captured and per-expert decodes leave no GPU bytes behind once the model is disposed', async () => {
    if (!gpu.available) return;
    for (const mode of ['fused', 'per-expert'] as const) {
      await synchronize();
      const before = memoryStats().liveBytes;
      const { model } = await loadModel(dirs.moe, { device: 'webgpu', maxSequence: 32, moeMode: mode });
      await measureDecode(model, { promptTokens: 3, decodeSteps: 2 });
      model.dispose();
      await synchronize();
      expect(memoryStats().liveBytes - before, `${mode}: bytes still live`).toBe(0);
    }
  });
});

describe(`LFM2 FP8 and checkpoint errors ${gpu.skipReason}`, () => {
  it('--dtype fp8 (quantized at load) and an FP8 checkpoint run on both devices and stay close to the float weights', async () => {
    const config: Lfm2Config = { ...MOE, hiddenSize: 128, intermediateSize: 128, headDim: 32, moe: { ...MOE.moe!, moeIntermediateSize: 128 } };
    dirs.fp8src = mkdtempSync(join(tmpdir(), 'tensorgpu-lfm2-fp8src-'));
    dirs.fp8 = mkdtempSync(join(tmpdir(), 'tensorgpu-lfm2-fp8-'));
    await writeRandomLfm2Checkpoint(dirs.fp8src, config, { dtype: 'bfloat16', seed: 2 });
    await writeRandomLfm2Checkpoint(dirs.fp8, config, { dtype: 'fp8', seed: 2 });
    const ids = SEQUENCE.slice(0, 5);
    const plain = await rows(await open('fp8src', 'cpu'), ids);
    const cosine = (a: Float32Array, b: Float32Array) => {
      let dot = 0;
      let a2 = 0;
      let b2 = 0;
      for (let i = 0; i < a.length; i++) {
        dot += a[i] * b[i];
        a2 += a[i] ** 2;
        b2 += b[i] ** 2;
      }
      return dot / Math.sqrt(a2 * b2);
    };
    const byDevice: Record<string, { quantized: Float32Array; stored: Float32Array }> = {};
    for (const device of devices) {
      const atLoad = await open('fp8src', device, { dtype: 'fp8' });
      const quantized = await rows(atLoad, ids);
      if (device === 'webgpu') {
        // Quantized after stacking, q|k|v (kv rows 64: not a multiple of 128) stay one GEMV, as with bf16.
        const plainGpu = await open('fp8src', device);
        await rows(plainGpu, ids);
        const bf16Dispatches = plainGpu.lastForward.dispatches;
        await rows(atLoad, ids);
        expect(atLoad.lastForward.dispatches).toBe(bf16Dispatches);
      }
      const stored = await rows(await open('fp8', device), ids);
      byDevice[device] = { quantized, stored };
      // Quantized from bf16 at load, or from float32 by the generator: near the bf16 logits, not equal. e4m3 rounds
      // each weight by up to 1/16 and a random-weight model amplifies it through 5 layers (measured cosine ~0.985);
      // a wrong scale or dequantization gives a cosine near 0.
      expect(cosine(plain, quantized), `${device} quantized at load vs bf16`).toBeGreaterThan(0.95);
      expect(cosine(plain, stored), `${device} FP8 checkpoint vs bf16`).toBeGreaterThan(0.95);
    }
    if (byDevice.webgpu) {
      expectClose(byDevice.webgpu.quantized, byDevice.cpu.quantized, { atol: 1e-3, rtol: 1e-3 }, 'quantized at load: webgpu vs cpu');
      expectClose(byDevice.webgpu.stored, byDevice.cpu.stored, { atol: 1e-3, rtol: 1e-3 }, 'FP8 checkpoint: webgpu vs cpu');
    }
  });

  it('an unknown model_type names it and the supported ones', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-lfm2-bad-'));
    try {
      await writeRandomLfm2Checkpoint(dir, DENSE, { dtype: 'float32' });
      const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
      writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...config, model_type: 'mamba2' }));
      await expect(loadModel(dir, { device: 'cpu' })).rejects.toThrow(
        /model_type 'mamba2' is not supported \(supported: qwen3, qwen3_moe, lfm2, lfm2_moe, qwen3_5, qwen3_5_moe\)/,
      );
      await expect(loadQwen3(dirs.dense, { device: 'cpu' })).rejects.toThrow(/the checkpoint is LFM2, not Qwen3/);
      writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...config, layer_types: ['conv'] }));
      await expect(loadModel(dir, { device: 'cpu' })).rejects.toThrow(/layer_types must be a list of num_hidden_layers \(3\) entries/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a missing expert tensor or a mis-shaped conv is a CheckpointError naming the tensor', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-lfm2-missing-'));
    try {
      const missing = 'model.layers.3.feed_forward.experts.5.w3.weight';
      const sources = randomSources(lfm2WeightSpecs(MOE), 'float32', 1).filter(([name]) => name !== missing);
      await writeCheckpoint(dir, sources, { config: lfm2ToHfConfig(MOE) });
      const err = await loadModel(dir, { device: 'cpu' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CheckpointError);
      expect(String(err)).toContain(`checkpoint has no tensor '${missing}'`);
      writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...lfm2ToHfConfig(MOE), conv_L_cache: 4 }));
      await expect(loadModel(dir, { device: 'cpu' })).rejects.toThrow(
        /tensor 'model.layers.0.conv.conv.weight' is \[32, 1, 3\], the config implies \[32, 1, 4\]/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
