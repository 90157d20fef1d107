// The training forward of the model classes (Qwen3 dense and MoE, LFM2 dense and MoE) equals their inference
// forward on CPU and WebGPU; its LoRA gradients agree between the devices; an FP8 base passes gradients to the
// adapters through its dequantized weights.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { copyInto, crossEntropy, Generator, memoryStats, randn, setDefaultDevice, synchronize, tensor, tidy } from '../../src/index.js';
import type { Qwen3Config } from '../../src/models/qwen3/config.js';
import { loadModel, type LoadedModel } from '../../src/models/load.js';
import { writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { writeRandomLfm2Checkpoint } from '../../src/models/lfm2/random-checkpoint.js';
import { QWEN3_PRESETS } from '../../src/models/qwen3/random-checkpoint.js';
import { LFM2_REFERENCE_CASES } from '../../tools/lfm2-reference/presets.js';
import { trainingLogits, trainingView } from '../../src/train/decoder-training.js';
import { LoraAdapter, DEFAULT_LORA_TARGETS, defaultLoraTargets } from '../../src/train/lora.js';
import { saveWeights } from '../../src/train/export.js';
import { expectClose } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');
const devices = ['cpu', ...(gpu.available ? ['webgpu' as const] : [])] as const;

const small = (c: Qwen3Config): Qwen3Config => ({
  ...c,
  vocabSize: 96,
  hiddenSize: 32,
  intermediateSize: 48,
  numHiddenLayers: 2,
  numAttentionHeads: 4,
  numKeyValueHeads: 2,
  headDim: 8,
  bosTokenId: 1,
  eosTokenIds: [2],
});
const CONFIGS = {
  qwen3: small(QWEN3_PRESETS['qwen3-tiny']),
  qwen3moe: {
    ...small(QWEN3_PRESETS['qwen3-moe-tiny']),
    moe: { numExperts: 4, numExpertsPerTok: 2, moeIntermediateSize: 16, normTopkProb: true, decoderSparseStep: 1, mlpOnlyLayers: [] },
  },
};
const LFM2 = { lfm2: LFM2_REFERENCE_CASES['lfm2-ref'].config, lfm2moe: LFM2_REFERENCE_CASES['lfm2-moe-ref'].config };
const IDS = [3, 17, 42, 5, 88, 1, 60, 20, 9, 33, 71];

const dirs: Record<string, string> = {};
const loaded: LoadedModel[] = [];

async function open(name: string, device: 'cpu' | 'webgpu') {
  const m = await loadModel(dirs[name], { device, maxSequence: 16 });
  loaded.push(m);
  return m.model;
}

beforeAll(async () => {
  for (const [name, config] of Object.entries(CONFIGS)) {
    dirs[name] = mkdtempSync(join(tmpdir(), `tensorgpu-train-${name}-`));
    await writeRandomQwen3Checkpoint(dirs[name], config, { dtype: 'float32', seed: 3 });
  }
  for (const [name, config] of Object.entries(LFM2)) {
    dirs[name] = mkdtempSync(join(tmpdir(), `tensorgpu-train-${name}-`));
    await writeRandomLfm2Checkpoint(dirs[name], config, { dtype: 'float32', seed: 3 });
  }
  dirs.fp8 = mkdtempSync(join(tmpdir(), 'tensorgpu-train-fp8-'));
  await writeRandomQwen3Checkpoint(dirs.fp8, { ...CONFIGS.qwen3, hiddenSize: 128, intermediateSize: 256, headDim: 32 }, { dtype: 'fp8', seed: 3 });
});

afterAll(() => {
  for (const m of loaded) m.model.dispose();
  for (const d of Object.values(dirs)) rmSync(d, { recursive: true, force: true });
});

describe.skipIf(!gpu.available)(`training forward of the model classes ${gpu.skipReason}`, () => {
  for (const name of ['qwen3', 'qwen3moe', 'lfm2', 'lfm2moe']) {
    it(`${name}: the training logits equal the inference forward's, on every device`, async () => {
      const ids = name.startsWith('lfm2') ? IDS.slice(0, 9) : IDS;
      for (const device of devices) {
        const model = await open(name, device);
        const tokens = tensor(ids, { dtype: 'int32', device });
        const cache = model.newCache();
        const want = await (await model.forward(tokens, cache, { lastOnly: false })).toArray();
        cache.dispose();
        const got = await (await trainingLogits(trainingView(model), tokens)).toArray();
        expect(got.length).toBe(ids.length * model.config.vocabSize);
        expectClose(got, want, { atol: 2e-4, rtol: 1e-4 }, `${name} on ${device}`);
      }
    });
  }

  for (const name of ['qwen3moe', 'lfm2moe', 'lfm2']) {
    it(`${name}: the weights exported in Hugging Face names load back to the same logits`, async () => {
      const model = await open(name, 'cpu');
      const out = mkdtempSync(join(tmpdir(), `tensorgpu-export-${name}-`));
      dirs[`${name}-export`] = out;
      await saveWeights(out, trainingView(model), dirs[name]);
      const again = await loadModel(out, { device: 'cpu', maxSequence: 16 });
      loaded.push(again);
      const tokens = tensor(IDS.slice(0, 6), { dtype: 'int32', device: 'cpu' });
      const logits = async (m: typeof model) => (await trainingLogits(trainingView(m), tokens)).toArray();
      expect(Array.from(await logits(again.model))).toEqual(Array.from(await logits(model)));
    });
  }

  for (const name of ['qwen3moe', 'lfm2moe']) {
    it(`${name}: adapters on the experts change the training logits, and merged into the stacked experts give the same`, async () => {
      const device = devices.at(-1)!;
      const model = await open(name, device);
      const view = trainingView(model);
      const expertSites = view.sites.filter((s) => s.expert !== undefined);
      expect(expertSites.length).toBe(3 * model.config.moe!.numExperts * view.layers.filter((l) => l.ff.kind === 'moe').length);
      expect(expertSites[0].name).toMatch(/^model\.layers\.\d+\.(mlp|feed_forward)\.experts\.0\.(gate_proj|w1)$/);
      const family = view.family;
      const targets = family === 'qwen3' ? ['gate_proj', 'up_proj', 'down_proj'] : ['w1', 'w3', 'w2'];
      expect(defaultLoraTargets(view)).not.toContain(targets[0]);
      const adapter = LoraAdapter.create(view.sites, { rank: 2, alpha: 4, targetModules: targets }, { device, generator: new Generator(3) });
      for (const { b } of adapter.modules.values()) tidy(() => copyInto(b, randn(b.shape, { device, generator: new Generator(4) }).mul(0.2)));
      const tokens = tensor(IDS.slice(0, 8), { dtype: 'int32', device });
      const base = await (await trainingLogits(view, tokens)).toArray();
      const want = await (await trainingLogits(view, tokens, adapter.delta)).toArray();
      expect(Math.max(...Array.from(want, (v, i) => Math.abs(v - base[i])))).toBeGreaterThan(1e-3);
      adapter.merge(view.sites);
      const cache = model.newCache();
      const got = await (await model.forward(tokens, cache, { lastOnly: false })).toArray();
      cache.dispose();
      expectClose(got, want, { atol: 2e-4, rtol: 1e-4 }, `${name} merged experts`);
      adapter.dispose();
    });
  }

  for (const name of ['qwen3moe', 'lfm2', 'fp8']) {
    it(`${name}: LoRA gradients agree between CPU and WebGPU; the base has none`, async () => {
      const grads: Float32Array[][] = [];
      for (const device of devices) {
        const model = await open(name, device);
        await synchronize();
        const live = memoryStats().liveBytes;
        const view = trainingView(model);
        const family = view.family;
        const adapter = LoraAdapter.create(
          view.sites,
          { rank: 4, alpha: 8, targetModules: DEFAULT_LORA_TARGETS[family] },
          { device, generator: new Generator(11) },
        );
        // B starts at zero (so A's gradient would too): give B values so both halves are checked.
        for (const { b } of adapter.modules.values()) tidy(() => copyInto(b, randn(b.shape, { device, generator: new Generator(5) }).mul(0.1)));
        const ids = IDS.slice(0, 9);
        const [inputs, targets] = [tensor(ids.slice(0, 8), { dtype: 'int32', device }), tensor(ids.slice(1), { dtype: 'int32', device })];
        const logits = await trainingLogits(view, inputs, adapter.delta);
        const loss = crossEntropy(logits, targets);
        loss.backward();
        for (const t of [inputs, targets, logits, loss]) t.dispose();
        grads.push(await Promise.all(adapter.parameters().map(async (p) => (await p.grad!.toArray()) as Float32Array)));
        for (const w of model.weightTensors()) expect(w.grad).toBeUndefined();
        expect(grads.at(-1)!.some((g) => g.some((v) => v !== 0))).toBe(true);
        adapter.dispose();
        await synchronize();
        expect(memoryStats().liveBytes, `live GPU bytes after forward + backward on ${device}`).toBe(live);
      }
      grads[0].forEach((g, i) => expectClose(grads[1][i], g, { atol: 1e-4, rtol: 1e-3 }, `${name} adapter tensor ${i}`));
    });
  }
});
