// The MoE training forward with grouped experts (moeExperts: every expert's forward and backward in a few
// dispatches, the top-k ids never read back) against the composed one (each chosen expert run on its tokens by
// per-expert ops): the same logits and the same LoRA gradients for Qwen3-MoE (softmax router, top-2 of 4),
// LFM2-MoE (sigmoid router with a selection bias and normalize eps), Qwen3.6-MoE with its shared expert stacked as
// expert E and kept beside (its default adapters cover the shared expert, which then runs as a dense MLP beside the
// grouped routed experts), on CPU and WebGPU; and on WebGPU far fewer dispatches per step. Adapters on the routed
// experts' projections (kept as stacks [E, r, in] / [E, out, r]) train through differentiable expertLinears.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { copyInto, crossEntropy, Generator, gpuCounters, randn, setDefaultDevice, synchronize, tensor, tidy } from '../../src/index.js';
import type { Qwen3Config } from '../../src/models/qwen3/config.js';
import { loadModel, type LoadedModel } from '../../src/models/load.js';
import { QWEN3_PRESETS, writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import { writeRandomLfm2Checkpoint } from '../../src/models/lfm2/random-checkpoint.js';
import { writeRandomQwen35Checkpoint } from '../../src/models/qwen3_5/presets.js';
import { LFM2_REFERENCE_CASES } from '../../tools/lfm2-reference/presets.js';
import { QWEN3_5_REFERENCE_CASES } from '../../tools/qwen3_5-reference/presets.js';
import { trainingLogits, trainingView } from '../../src/train/decoder-training.js';
import { defaultLoraTargets, LoraAdapter } from '../../src/train/lora.js';
import { loadAdapter, saveAdapter } from '../../src/train/peft.js';
import { expectClose } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');
const devices = ['cpu', ...(gpu.available ? ['webgpu' as const] : [])] as const;

const qwen3moe: Qwen3Config = {
  ...QWEN3_PRESETS['qwen3-moe-tiny'],
  vocabSize: 96,
  hiddenSize: 32,
  intermediateSize: 48,
  numHiddenLayers: 2,
  numAttentionHeads: 4,
  numKeyValueHeads: 2,
  headDim: 8,
  bosTokenId: 1,
  eosTokenIds: [2],
  // Top-2 of 8 over 10 tokens: some experts get no token.
  moe: { numExperts: 8, numExpertsPerTok: 2, moeIntermediateSize: 16, normTopkProb: true, decoderSparseStep: 1, mlpOnlyLayers: [] },
};
const IDS = [3, 17, 42, 5, 88, 1, 60, 20, 9, 33, 71];

const dirs: Record<string, string> = {};
const loaded: LoadedModel[] = [];

beforeAll(async () => {
  const dir = (name: string) => (dirs[name] = mkdtempSync(join(tmpdir(), `tensorgpu-moe-grouped-${name}-`)));
  await writeRandomQwen3Checkpoint(dir('qwen3moe'), qwen3moe, { dtype: 'float32', seed: 5 });
  await writeRandomLfm2Checkpoint(dir('lfm2moe'), LFM2_REFERENCE_CASES['lfm2-moe-ref'].config, { dtype: 'float32', seed: 5 });
  await writeRandomQwen35Checkpoint(dir('qwen3.6 stacked shared'), QWEN3_5_REFERENCE_CASES['qwen3.6-moe-ref'].config, { dtype: 'float32', seed: 5 });
  await writeRandomQwen35Checkpoint(dir('qwen3.6 shared beside'), QWEN3_5_REFERENCE_CASES['qwen3.6-moe-wide-shared-ref'].config, {
    dtype: 'float32',
    seed: 5,
  });
});

afterAll(() => {
  for (const m of loaded) m.model.dispose();
  for (const d of Object.values(dirs)) rmSync(d, { recursive: true, force: true });
});

/** Logits, the loss's gradients of a LoRA adapter (attention-only, or every projection) and the step's dispatches. */
async function step(name: string, device: 'cpu' | 'webgpu', composed: boolean, experts: boolean, dtype?: 'fp8' | 'int4') {
  const m = await loadModel(dirs[name], { device, maxSequence: 16, dtype, groupSize: dtype === 'int4' ? 32 : undefined });
  loaded.push(m);
  const view = trainingView(m.model);
  const targets = experts ? [...new Set(view.sites.map((s) => s.module))] : defaultLoraTargets(view);
  const adapter = LoraAdapter.create(view.sites, { rank: 4, alpha: 8, targetModules: targets }, { device, generator: new Generator(7) });
  // B starts at zero (A's gradient would too): give B values so both halves are checked.
  for (const { b } of adapter.modules.values()) tidy(() => copyInto(b, randn(b.shape, { device, generator: new Generator(9) }).mul(0.1)));
  const ids = IDS.slice(0, 11);
  const [inputs, labels] = [tensor(ids.slice(0, 10), { dtype: 'int32', device }), tensor(ids.slice(1), { dtype: 'int32', device })];
  await synchronize();
  const before = gpuCounters().dispatches;
  const logits = await trainingLogits(view, inputs, adapter.delta, { moeComposed: composed });
  const loss = crossEntropy(logits, labels);
  loss.backward();
  const dispatches = gpuCounters().dispatches - before;
  const moe = view.layers.map((l) => l.ff).find((ff) => ff.kind === 'moe');
  const out = {
    logits: await logits.toArray(),
    grads: [] as ArrayLike<number>[],
    dispatches,
    modules: adapter.modules.size,
    expertDtype: moe?.weights.gateUp.data.dtype,
  };
  // An adapter of an expert no token chose has no gradient: zeros.
  for (const p of adapter.parameters()) out.grads.push(p.grad ? await p.grad.toArray() : new Float32Array(p.numel));
  for (const t of [inputs, labels, logits, loss]) t.dispose();
  adapter.dispose();
  return out;
}

/** Full fine-tuning: logits, the gradient of every weight (the expert stacks included) and the step's dispatches. */
async function fullStep(name: string, device: 'cpu' | 'webgpu', composed: boolean) {
  const m = await loadModel(dirs[name], { device, maxSequence: 16 });
  loaded.push(m);
  const view = trainingView(m.model);
  const weights = m.model.weightTensors();
  for (const w of weights) w.requiresGrad_();
  const [inputs, labels] = [tensor(IDS.slice(0, 10), { dtype: 'int32', device }), tensor(IDS.slice(1, 11), { dtype: 'int32', device })];
  await synchronize();
  const before = gpuCounters().dispatches;
  const logits = await trainingLogits(view, inputs, undefined, { moeComposed: composed });
  const loss = crossEntropy(logits, labels);
  loss.backward();
  const dispatches = gpuCounters().dispatches - before;
  const out = { logits: await logits.toArray(), grads: [] as ArrayLike<number>[], shapes: weights.map((w) => w.shape.join('x')), dispatches };
  for (const w of weights) out.grads.push(w.grad ? await w.grad.toArray() : new Float32Array(w.numel));
  for (const t of [inputs, labels, logits, loss]) t.dispose();
  for (const w of weights) w.zeroGrad();
  return out;
}

describe('MoE training: grouped experts vs per-expert ops', () => {
  for (const name of ['qwen3moe', 'lfm2moe', 'qwen3.6 stacked shared', 'qwen3.6 shared beside']) {
    for (const device of devices) {
      it(`${name} on ${device}: same logits and LoRA gradients`, async () => {
        const grouped = await step(name, device, false, false);
        const composed = await step(name, device, true, false);
        expectClose(grouped.logits, composed.logits, { atol: 2e-5, rtol: 1e-4 }, `${name} logits`);
        expect(grouped.grads.length).toBeGreaterThan(0);
        // The CPU sums in float64 either way; WebGPU in float32 in another order (the tolerance of CPU vs WebGPU
        // LoRA gradients in decoder-training.test.ts).
        const atol = device === 'cpu' ? 1e-5 : 1e-4;
        grouped.grads.forEach((g, i) => expectClose(g, composed.grads[i], { atol, rtol: 1e-3 }, `${name} adapter tensor ${i}`));
        expect(grouped.grads.some((g) => Array.from(g).some((v) => v !== 0))).toBe(true);
        // Qwen3-MoE is all MoE layers; the others have dense or DeltaNet layers and a dense shared expert besides.
        const most = name === 'qwen3moe' ? composed.dispatches / 2 : composed.dispatches * 0.75;
        if (device === 'webgpu') expect(grouped.dispatches, `grouped ${grouped.dispatches} vs composed ${composed.dispatches}`).toBeLessThan(most);
      });
    }
  }

  for (const device of devices) {
    it(`full fine-tuning of qwen3moe on ${device}: the grouped experts give the same gradients of every weight, expert stacks included`, async () => {
      const grouped = await fullStep('qwen3moe', device, false);
      const composed = await fullStep('qwen3moe', device, true);
      expectClose(grouped.logits, composed.logits, { atol: 2e-5, rtol: 1e-4 }, 'logits');
      const atol = device === 'cpu' ? 1e-5 : 1e-4;
      let stacks = 0;
      grouped.grads.forEach((g, i) => {
        const [e, n, k] = grouped.shapes[i].split('x').map(Number);
        if (k !== undefined && e === 8 && n * k > 0) stacks++;
        expectClose(g, composed.grads[i], { atol, rtol: 1e-3 }, `weight ${i} [${grouped.shapes[i]}]`);
      });
      // gateUp and down of both layers.
      expect(stacks).toBe(4);
      if (device === 'webgpu')
        expect(grouped.dispatches, `grouped ${grouped.dispatches} vs composed ${composed.dispatches}`).toBeLessThan(composed.dispatches / 2);
    });
  }

  for (const [dtype, stored] of [
    ['fp8', 'float8_e4m3fn'],
    ['int4', 'int32'],
  ] as const) {
    for (const device of devices) {
      it(`qwen3moe with ${dtype} experts (quantized at load) on ${device}: the grouped experts over the frozen stacks, adapters on attention or on every projection`, async () => {
        for (const experts of [false, true]) {
          const grouped = await step('qwen3moe', device, false, experts, dtype);
          const composed = await step('qwen3moe', device, true, experts, dtype);
          expect(grouped.expertDtype).toBe(stored);
          expectClose(grouped.logits, composed.logits, { atol: 2e-5, rtol: 1e-4 }, `experts ${experts}: logits`);
          const atol = device === 'cpu' ? 1e-5 : 1e-4;
          grouped.grads.forEach((g, i) => expectClose(g, composed.grads[i], { atol, rtol: 1e-3 }, `experts ${experts}: adapter tensor ${i}`));
          expect(grouped.grads.some((g) => Array.from(g).some((v) => v !== 0))).toBe(true);
          if (device === 'webgpu')
            expect(grouped.dispatches, `grouped ${grouped.dispatches} vs composed ${composed.dispatches}`).toBeLessThan(composed.dispatches / 2);
        }
      });
    }
  }

  it('an adapter on the experts saved in PEFT files loads back stacked: the same tensors, stacks and logits', async () => {
    const m = await loadModel(dirs.qwen3moe, { device: 'cpu', maxSequence: 16 });
    loaded.push(m);
    const view = trainingView(m.model);
    const targets = [...new Set(view.sites.map((s) => s.module))];
    const adapter = LoraAdapter.create(view.sites, { rank: 2, alpha: 4, targetModules: targets }, { generator: new Generator(3) });
    for (const { b } of adapter.modules.values()) tidy(() => copyInto(b, randn(b.shape, { generator: new Generator(4) }).mul(0.1)));
    const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-moe-adapter-'));
    try {
      await saveAdapter(dir, adapter);
      const back = await loadAdapter(dir, view.sites);
      // gate, up and down of both layers' 8 experts.
      expect(back.stacks.map((s) => s.sites.length)).toEqual([8, 8, 8, 8, 8, 8]);
      expect([...back.modules.keys()]).toEqual([...adapter.modules.keys()]);
      const values = (a: LoraAdapter) => Promise.all(a.parameters().map(async (p) => Array.from(await p.toArray())));
      expect(await values(back)).toEqual(await values(adapter));
      const ids = tensor(IDS.slice(0, 10), { dtype: 'int32' });
      const [want, got] = [await trainingLogits(view, ids, adapter.delta), await trainingLogits(view, ids, back.delta)];
      expect(Array.from(await got.toArray())).toEqual(Array.from(await want.toArray()));
      for (const t of [ids, want, got]) t.dispose();
      back.dispose();
    } finally {
      adapter.dispose();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  for (const name of ['qwen3moe', 'qwen3.6 stacked shared']) {
    for (const device of devices) {
      it(`${name} on ${device}: adapters on every expert projection train through the grouped experts (stacked A and B)`, async () => {
        const grouped = await step(name, device, false, true);
        const composed = await step(name, device, true, true);
        expect(grouped.modules).toBeGreaterThan(3 * 4);
        expectClose(grouped.logits, composed.logits, { atol: 2e-5, rtol: 1e-4 }, `${name} logits`);
        const atol = device === 'cpu' ? 1e-5 : 1e-4;
        grouped.grads.forEach((g, i) => expectClose(g, composed.grads[i], { atol, rtol: 1e-3 }, `${name} adapter tensor ${i}`));
        expect(grouped.grads.some((g) => Array.from(g).some((v) => v !== 0))).toBe(true);
        if (device === 'webgpu')
          expect(grouped.dispatches, `grouped ${grouped.dispatches} vs composed ${composed.dispatches}`).toBeLessThan(composed.dispatches / 2);
      });
    }
  }
});
