// `--dtype int4` end to end on a generated model (what `generate --model builtin:... --dtype int4` loads): a tiny
// Qwen3-MoE quantized at load to packed 4 bits (groups of 32) greedy-decodes the same tokens on the CPU and on WebGPU
// (the fused int4 expert kernels and int4 GEMVs against the float64 oracle), and its logits are close to those of a
// float32 checkpoint holding the same weights dequantized (quantizing those again gives back the same codes and
// scales up to float32 rounding of the scales).
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
import { loadModel } from '../../src/models/load.js';
import type { CausalLM } from '../../src/models/causal-lm.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const TINY_MOE: Qwen3Config = {
  modelType: 'qwen3_moe',
  vocabSize: 384,
  hiddenSize: 64,
  intermediateSize: 128,
  numHiddenLayers: 2,
  numAttentionHeads: 2,
  numKeyValueHeads: 1,
  headDim: 32,
  rmsNormEps: 1e-6,
  ropeTheta: 1_000_000,
  maxPositionEmbeddings: 512,
  tieWordEmbeddings: true,
  attentionBias: false,
  bosTokenId: 0,
  eosTokenIds: [1],
  moe: { numExperts: 4, numExpertsPerTok: 2, moeIntermediateSize: 64, normTopkProb: true, decoderSparseStep: 1, mlpOnlyLayers: [] },
};

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

function maxRel(got: Float32Array, want: Float32Array): number {
  let scale = 0;
  for (const v of want) scale = Math.max(scale, Math.abs(v));
  let worst = 0;
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]) / scale);
  return worst;
}

/** A float32 copy of the checkpoint whose projection weights are their int4 (group 32) round trip. */
async function writeDequantizedCopy(src: string): Promise<string> {
  const ck = await Checkpoint.open(src);
  const entries: [string, TensorSource][] = [];
  for (const name of ck.names) {
    const e = ck.entry(name);
    let t = (await ck.load(name, { dtype: 'float32' })) as ReturnType<typeof tensor>;
    if (name.endsWith('_proj.weight')) {
      const q = quantizeInt4(t, GROUP);
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
    expect(maxRel(want.logits[0], ref.logits[0]), 'prefill logits vs dequantized float32').toBeLessThan(1e-4);

    if (gpu.available) {
      const g = (await loadModel(dir, { device: 'webgpu', dtype: 'int4', groupSize: GROUP, maxSequence: 32 })).model;
      const got = await greedy(g, PROMPT, STEPS);
      g.dispose();
      expect(got.tokens).toEqual(want.tokens);
      for (let s = 0; s < STEPS; s++) expect(maxRel(got.logits[s], want.logits[s]), `webgpu step ${s}`).toBeLessThan(1e-4);
    }
  });
});
