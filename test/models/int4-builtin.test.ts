// `--dtype int4` end to end on a generated model (what `generate --model builtin:... --dtype int4` loads): a tiny
// Qwen3-MoE quantized at load to packed 4 bits (groups of 32) greedy-decodes the same tokens on the CPU and on WebGPU
// (the fused int4 expert kernels and int4 GEMVs against the float64 oracle), and its logits are close to those of a
// float32 checkpoint holding the same weights dequantized (quantizing those again gives back the same codes and
// scales up to float32 rounding of the scales). The same for a tiny Qwen3.6 (Qwen3.5-MoE), its experts stored as the
// release's fused 3-D tensors and one by one: every expert stack, the shared expert stacked as expert E, and the
// DeltaNet / attention row stacks come back packed, so the fused MoE block reads int4.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { setDefaultDevice, tensor } from '../../src/index.js';
import { Checkpoint } from '../../src/formats/checkpoint.js';
import { writeSafetensors, type TensorSource } from '../../src/formats/safetensors-writer.js';
import { dequantizeInt4, quantizeInt4 } from '../../src/ops/int4.js';
import type { Qwen3Config } from '../../src/models/qwen3/config.js';
import { writeRandomQwen3Checkpoint } from '../../src/models/qwen3/random-checkpoint.js';
import type { Qwen35Config } from '../../src/models/qwen3_5/config.js';
import { Qwen35Model } from '../../src/models/qwen3_5/model.js';
import { writeRandomQwen35Checkpoint } from '../../src/models/qwen3_5/presets.js';
import { QWEN3_5_REFERENCE_CASES } from '../../tools/qwen3_5-reference/presets.js';
import { measureDecode } from '../../src/generate/measure.js';
import { loadModel } from '../../src/models/load.js';
import type { CausalLM } from '../../src/models/causal-lm.js';
import { maxRelativeToScale } from '../helpers/compare.js';
import { SMALL_QWEN3_MOE } from '../helpers/qwen3.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const TINY_MOE: Qwen3Config = { ...SMALL_QWEN3_MOE, bosTokenId: 0 };

const GROUP = 32;

/** Greedy tokens after `prompt` (argmax on the host) and each step's logits. */
async function greedy(model: CausalLM, prompt: number[], steps: number): Promise<{ tokens: number[]; logits: Float32Array[] }> {
  const cache = model.newCache();
  const tokens: number[] = [];
  const logits: Float32Array[] = [];
  let input = prompt;
  for (let s = 0; s < steps; s++) {
    const t = tensor(input, { dtype: 'int32', device: model.device });
    const l = await model.forward(t, cache);
    const v = (await l.toArray()) as Float32Array;
    t.dispose();
    l.dispose();
    logits.push(v);
    let best = 0;
    for (let i = 1; i < v.length; i++) if (v[i] > v[best]) best = i;
    tokens.push(best);
    input = [best];
  }
  return { tokens, logits };
}

/** Qwen3.6-MoE with widths int4 groups of 32 divide (K = hidden 32, value dim 64, attention 64, experts 32). */
const QWEN36_REF = QWEN3_5_REFERENCE_CASES['qwen3.6-moe-ref'].config;
const TINY_QWEN36: Qwen35Config = {
  ...QWEN36_REF,
  linear: { ...QWEN36_REF.linear, valueHeadDim: 16 },
  numHiddenLayers: 2,
  layerTypes: ['linear_attention', 'full_attention'],
  moe: { numExperts: 4, numExpertsPerTok: 2, moeIntermediateSize: 32, sharedExpertIntermediateSize: 32 },
};

const isProjection = (name: string) => name.endsWith('_proj.weight');

/**
 * A float32 copy of the checkpoint whose projection weights (`quantized(name)`) are their int4 (group 32) round
 * trip, 3-D expert stacks row by row.
 */
async function writeDequantizedCopy(src: string, quantized: (name: string) => boolean = isProjection): Promise<string> {
  const ck = await Checkpoint.open(src);
  const entries: [string, TensorSource][] = [];
  for (const name of ck.names) {
    const e = ck.entry(name);
    let t = (await ck.load(name, { dtype: 'float32' })) as ReturnType<typeof tensor>;
    if (quantized(name)) {
      const k = e.shape[e.shape.length - 1];
      const q = quantizeInt4(t.reshape([t.numel / k, k]), GROUP);
      t = dequantizeInt4(q);
    }
    const bytes = new Uint8Array(((await t.toArray()) as Float32Array).buffer.slice(0));
    entries.push([name, { dtype: 'float32', shape: e.shape, bytes: () => bytes }]);
  }
  await ck.close();
  const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-int4-deq-'));
  await writeSafetensors(join(dir, 'model.safetensors'), entries);
  writeFileSync(join(dir, 'config.json'), readFileSync(join(src, 'config.json'), 'utf8'));
  return dir;
}

const PROMPT = [3, 17, 250, 9, 41, 7];
const STEPS = 6;

describe(`--dtype int4 on a generated Qwen3-MoE ${gpu.skipReason}`, () => {
  it('greedy tokens on the CPU equal WebGPU; logits close to the dequantized float32 weights', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-int4-builtin-'));
    await writeRandomQwen3Checkpoint(dir, TINY_MOE, { dtype: 'float32', seed: 3 });
    const cpu = (await loadModel(dir, { device: 'cpu', dtype: 'int4', groupSize: GROUP, maxSequence: 32 })).model;
    const want = await greedy(cpu, PROMPT, STEPS);
    cpu.dispose();

    // The dequantized float32 weights (routers, norms, embeddings as stored) run as float32.
    const deq = (await loadModel(await writeDequantizedCopy(dir), { device: 'cpu', maxSequence: 32 })).model;
    const ref = await greedy(deq, PROMPT, STEPS);
    deq.dispose();
    expect(maxRelativeToScale(want.logits[0], ref.logits[0]), 'prefill logits vs dequantized float32').toBeLessThan(1e-4);

    if (gpu.available) {
      const g = (await loadModel(dir, { device: 'webgpu', dtype: 'int4', groupSize: GROUP, maxSequence: 32 })).model;
      const got = await greedy(g, PROMPT, STEPS);
      g.dispose();
      expect(got.tokens).toEqual(want.tokens);
      for (let s = 0; s < STEPS; s++) expect(maxRelativeToScale(got.logits[s], want.logits[s]), `webgpu step ${s}`).toBeLessThan(1e-4);
    }
  });
});

describe(`--dtype int4 on a generated Qwen3.6-MoE ${gpu.skipReason}`, () => {
  // Every linear projection but the routers and the head: in_proj_*, q/k/v/o, out_proj, experts, shared expert.
  const quantized = (name: string) => /(_proj|in_proj_(qkv|z|b|a))(\.weight)?$/.test(name);
  const { numExperts: e, moeIntermediateSize: inter } = TINY_QWEN36.moe!;
  const h = TINY_QWEN36.hiddenSize;

  it.each([
    ['fused 3-D experts', false],
    ['experts one by one', true],
  ])('%s: packed expert stacks; CPU logits close to the dequantized float32 weights; WebGPU equals CPU', async (_, expertsOneByOne) => {
    const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-int4-qwen36-'));
    await writeRandomQwen35Checkpoint(dir, TINY_QWEN36, { dtype: 'float32', seed: 4, expertsOneByOne });
    const cpu = (await loadModel(dir, { device: 'cpu', dtype: 'int4', groupSize: GROUP, maxSequence: 32 })).model;
    expect(cpu).toBeInstanceOf(Qwen35Model);
    for (const layer of (cpu as Qwen35Model).weights.layers) {
      const mlp = layer.mlp;
      if (mlp.kind !== 'moe') throw new Error('expected a MoE layer');
      // The shared expert has the experts' width: expert E of the stacks, in the same packed layout.
      expect(mlp.sharedInStack).toBe(true);
      expect([mlp.gateUp.data.dtype, mlp.gateUp.data.shape, mlp.gateUp.int4?.groupSize]).toEqual(['int32', [e + 1, 2 * inter, h / 8], GROUP]);
      expect([mlp.gateUp.scale?.shape, mlp.gateUp.int4?.zero.shape]).toEqual([
        [e + 1, 2 * inter, h / GROUP],
        [e + 1, 2 * inter, h / GROUP],
      ]);
      expect([mlp.down.data.dtype, mlp.down.data.shape, mlp.down.int4?.zero.shape]).toEqual(['int32', [e + 1, h, inter / 8], [e + 1, h, inter / GROUP]]);
      const stacked = layer.mixer.kind === 'linear_attention' ? layer.mixer.inProj : layer.mixer.qkvg;
      expect('data' in stacked && stacked.int4?.groupSize).toBe(GROUP);
    }
    const want = await greedy(cpu, PROMPT, STEPS);
    cpu.dispose();

    const deq = (await loadModel(await writeDequantizedCopy(dir, quantized), { device: 'cpu', maxSequence: 32 })).model;
    const ref = await greedy(deq, PROMPT, STEPS);
    deq.dispose();
    expect(maxRelativeToScale(want.logits[0], ref.logits[0]), 'prefill logits vs dequantized float32').toBeLessThan(1e-4);

    if (gpu.available) {
      const g = (await loadModel(dir, { device: 'webgpu', dtype: 'int4', groupSize: GROUP, maxSequence: 32 })).model;
      const got = await greedy(g, PROMPT, STEPS);
      // The dispatches of the float model's decode step (qwen3_5.test.ts): the int4 experts take the fused block.
      const m = await measureDecode(g, { promptTokens: 4, decodeSteps: 2 });
      g.dispose();
      expect(got.tokens).toEqual(want.tokens);
      for (let s = 0; s < STEPS; s++) expect(maxRelativeToScale(got.logits[s], want.logits[s]), `webgpu step ${s}`).toBeLessThan(1e-4);
      expect(m.dispatchesPerLayerKind).toEqual({ linear_attention: 8, full_attention: 9 });
    }
  });
});
