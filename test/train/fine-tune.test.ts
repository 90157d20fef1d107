// Fine-tuning through the model classes on WebGPU: a tiny Qwen3 trained in full on a repeated sequence reaches
// near-zero loss with GPU memory flat from step to step; LoRA on a frozen base lowers the loss and leaves every
// base weight bit-identical; the adapter round-trips through PEFT's files and merges into the weights (float and
// FP8) to give the logits the unmerged adapter gives; bad adapter files are typed errors naming what is wrong.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CheckpointError, copyInto, Generator, memoryStats, randn, synchronize, tensor } from '../../src/index.js';
import type { Qwen3Config } from '../../src/models/qwen3/config.js';
import { loadModel, type LoadedModel } from '../../src/models/load.js';
import { QWEN3_PRESETS, writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { writeSafetensors } from '../../src/formats/safetensors-writer.js';
import { trainingLogits, trainingView } from '../../src/train/decoder-training.js';
import { FineTune, packSequences } from '../../src/train/fine-tune.js';
import { DEFAULT_LORA_TARGETS, LoraAdapter } from '../../src/train/lora.js';
import { ADAPTER_CONFIG, ADAPTER_WEIGHTS, loadAdapter, saveAdapter } from '../../src/train/peft.js';
import { expectClose } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
// Hundreds of steps: a guard against hangs only, generous for a busy 2-core machine under SwiftShader.
const HANG_GUARD_MS = 600_000;

const CONFIG: Qwen3Config = {
  ...QWEN3_PRESETS['qwen3-tiny'],
  vocabSize: 64,
  hiddenSize: 32,
  intermediateSize: 64,
  numHiddenLayers: 2,
  numAttentionHeads: 4,
  numKeyValueHeads: 2,
  headDim: 8,
  bosTokenId: 1,
  eosTokenIds: [2],
};
const SEQUENCE = Array.from({ length: 13 }, (_, i) => (i * 7 + 3) % 64);

const dirs: Record<string, string> = {};
const loaded: LoadedModel[] = [];
async function open(name: string) {
  const m = await loadModel(dirs[name], { device: 'webgpu', maxSequence: 16 });
  loaded.push(m);
  return m.model;
}

beforeAll(async () => {
  dirs.f32 = mkdtempSync(join(tmpdir(), 'tensorgpu-ft-'));
  await writeRandomQwen3Checkpoint(dirs.f32, CONFIG, { dtype: 'float32', seed: 8 });
  dirs.fp8 = mkdtempSync(join(tmpdir(), 'tensorgpu-ft-fp8-'));
  await writeRandomQwen3Checkpoint(dirs.fp8, { ...CONFIG, hiddenSize: 128, intermediateSize: 256, headDim: 32 }, { dtype: 'fp8', seed: 8 });
  dirs.adapter = mkdtempSync(join(tmpdir(), 'tensorgpu-ft-adapter-'));
});

afterAll(() => {
  for (const m of loaded) m.model.dispose();
  for (const d of Object.values(dirs)) rmSync(d, { recursive: true, force: true });
});

const snapshot = (tensors: { toArray(): Promise<ArrayLike<number>> }[]) => Promise.all(tensors.map(async (t) => Array.from(await t.toArray())));

describe('packSequences', () => {
  it('cuts windows of S + 1 tokens overlapping by one; repeats a short text; rejects what cannot train', () => {
    expect(packSequences([1, 2, 3, 4, 5, 6, 7], 3)).toEqual([
      [1, 2, 3, 4],
      [4, 5, 6, 7],
    ]);
    expect(packSequences([1, 2, 3], 4)).toEqual([[1, 2, 3, 1, 2]]);
    expect(() => packSequences([1], 4)).toThrow(/at least 2/);
    expect(() => packSequences([1, 2], 0)).toThrow(RangeError);
  });
});

describe.skipIf(!gpu.available)(`fine-tuning the model classes ${gpu.skipReason}`, () => {
  it(
    'full fine-tuning: near-zero loss on a repeated sequence, GPU memory flat from step to step',
    async () => {
      const model = await open('f32');
      const run = new FineTune(model, { kind: 'full' }, { steps: 150, lr: 1e-2, warmupSteps: 5, maxGradNorm: 1 });
      const losses: number[] = [];
      let live = -1;
      for (let i = 0; i < 150; i++) {
        const r = await run.step(SEQUENCE);
        losses.push(r.loss);
        await synchronize();
        if (i === 1) live = memoryStats().liveBytes;
        if (i > 1) expect(memoryStats().liveBytes, `live GPU bytes after step ${i}`).toBe(live);
        if (i === 2) expect(r.optimizerDispatches).toBe(run.params.length);
      }
      expect(losses[0]).toBeGreaterThan(3);
      expect(losses.at(-1)).toBeLessThan(0.05);
      run.dispose();
    },
    HANG_GUARD_MS,
  );

  it(
    'LoRA on a frozen base: the loss falls, one optimizer dispatch per step, every base weight stays bit-identical',
    async () => {
      const model = await open('f32');
      const base = await snapshot(model.weightTensors());
      const view = trainingView(model);
      const adapter = LoraAdapter.create(
        view.sites,
        { rank: 8, alpha: 16, targetModules: DEFAULT_LORA_TARGETS.qwen3 },
        { device: 'webgpu', generator: new Generator(1) },
      );
      expect(adapter.modules.size).toBe(CONFIG.numHiddenLayers * 7);
      const run = new FineTune(model, { kind: 'lora', adapter }, { steps: 80, lr: 2e-2, warmupSteps: 4 });
      const losses: number[] = [];
      for (let i = 0; i < 80; i++) {
        const r = await run.step(SEQUENCE);
        losses.push(r.loss);
        // Every A and B in one arena: one fused AdamW dispatch for all 28 tensors.
        if (i === 1) expect(r.optimizerDispatches).toBe(1);
      }
      expect(losses.at(-1)!).toBeLessThan(losses[0] * 0.2);
      expect(await snapshot(model.weightTensors())).toEqual(base);
      for (const w of model.weightTensors()) expect(w.grad).toBeUndefined();
      run.dispose();
      adapter.dispose();
    },
    HANG_GUARD_MS,
  );

  for (const name of ['f32', 'fp8']) {
    it(`${name}: PEFT files round-trip, and the merged weights give the unmerged adapter's logits`, async () => {
      const model = await open(name);
      const view = trainingView(model);
      const adapter = LoraAdapter.create(
        view.sites,
        { rank: 4, alpha: 8, targetModules: ['q_proj', 'v_proj', 'o_proj', 'up_proj', 'down_proj'] },
        { device: 'webgpu', generator: new Generator(2) },
      );
      for (const { b } of adapter.modules.values()) copyInto(b, randn(b.shape, { device: 'webgpu', generator: new Generator(3) }).mul(0.05));
      const dir = join(dirs.adapter, name);
      await saveAdapter(dir, adapter, { baseModel: 'test/qwen3' });
      const config = JSON.parse(readFileSync(join(dir, ADAPTER_CONFIG), 'utf8'));
      expect(config).toMatchObject({ peft_type: 'LORA', r: 4, lora_alpha: 8, task_type: 'CAUSAL_LM', base_model_name_or_path: 'test/qwen3' });
      const back = await loadAdapter(dir, view.sites, { device: 'webgpu' });
      expect([...back.modules.keys()]).toEqual([...adapter.modules.keys()]);
      expect([...back.modules.keys()][0]).toBe('model.layers.0.self_attn.q_proj');
      expect(await snapshot(back.parameters())).toEqual(await snapshot(adapter.parameters()));
      const ids = tensor(SEQUENCE.slice(0, 10), { dtype: 'int32', device: 'webgpu' });
      const want = await (await trainingLogits(view, ids, back.delta)).toArray();
      const before = await (await trainingLogits(view, ids)).toArray();
      back.merge(view.sites);
      const cache = model.newCache();
      const got = await (await model.forward(ids, cache, { lastOnly: false })).toArray();
      cache.dispose();
      // The adapter moves the logits by far more than the merge's rounding (FP8: every weight re-quantized).
      const rms = (a: ArrayLike<number>, b: ArrayLike<number>) => Math.sqrt(Array.from(a, (v, i) => (v - b[i]) ** 2).reduce((x, y) => x + y, 0) / a.length);
      expect(rms(want, before)).toBeGreaterThan(1e-2);
      if (name === 'f32') expectClose(got, want, { atol: 1e-4, rtol: 1e-4 }, 'merged vs unmerged');
      else expect(rms(got, want), `re-quantization error vs the adapter's effect ${rms(want, before)}`).toBeLessThan(rms(want, before) / 4);
      adapter.dispose();
      back.dispose();
    });
  }

  it('bad adapters: typed errors naming the field or tensor', async () => {
    const model = await open('f32');
    const view = trainingView(model);
    const dir = join(dirs.adapter, 'bad');
    const adapter = LoraAdapter.create(view.sites, { rank: 2, alpha: 4, targetModules: ['q_proj'] }, { device: 'webgpu' });
    await saveAdapter(dir, adapter);
    const config = JSON.parse(readFileSync(join(dir, ADAPTER_CONFIG), 'utf8'));
    writeFileSync(join(dir, ADAPTER_CONFIG), JSON.stringify({ ...config, r: 3 }));
    await expect(loadAdapter(dir, view.sites)).rejects.toThrow(/lora_A.weight' is \[2, 32\], r = 3/);
    writeFileSync(join(dir, ADAPTER_CONFIG), JSON.stringify({ ...config, use_dora: true }));
    await expect(loadAdapter(dir, view.sites)).rejects.toThrow(/use_dora/);
    writeFileSync(join(dir, ADAPTER_CONFIG), JSON.stringify({ ...config, peft_type: 'IA3' }));
    await expect(loadAdapter(dir, view.sites)).rejects.toBeInstanceOf(CheckpointError);
    writeFileSync(join(dir, ADAPTER_CONFIG), JSON.stringify(config));
    const a = { dtype: 'float32', shape: [2, 32], bytes: () => new Uint8Array(2 * 32 * 4) };
    await writeSafetensors(join(dir, ADAPTER_WEIGHTS), [['base_model.model.model.layers.9.self_attn.q_proj.lora_A.weight', a]]);
    await expect(loadAdapter(dir, view.sites)).rejects.toThrow(/layers\.9.*not a LoRA weight of a projection of this model/);
    await writeSafetensors(join(dir, ADAPTER_WEIGHTS), [['base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight', a]]);
    await expect(loadAdapter(dir, view.sites)).rejects.toThrow(/has lora_A but not lora_B/);
    expect(() => LoraAdapter.create(view.sites, { rank: 2, alpha: 4, targetModules: ['nope'] })).toThrow(/no projection matches/);
    adapter.dispose();
  });
});
