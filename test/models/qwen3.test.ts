// The Qwen3 / Qwen3-MoE forward on WebGPU against the CPU backend, on generated random-weight checkpoints: logits at
// prefill and at each of 16 decode steps within float32-accumulation tolerance, and greedy decoding identical on
// both. Also: the fused MoE block equals the per-expert loop, and an FP8 (128x128 block) checkpoint runs the same way.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setDefaultDevice, tensor, type Tensor } from '../../src/index.js';
import type { Qwen3Config } from '../../src/models/qwen3/config.js';
import { loadQwen3, type LoadedModel } from '../../src/models/qwen3/load.js';
import { writeRandomQwen3Checkpoint, type RandomWeightDType } from '../../src/models/qwen3/random-checkpoint.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const BASE = {
  vocabSize: 384,
  rmsNormEps: 1e-6,
  ropeTheta: 1_000_000,
  maxPositionEmbeddings: 512,
  attentionBias: false,
  bosTokenId: 0,
  eosTokenIds: [1],
} as const;

const CONFIGS: Record<string, { config: Qwen3Config; dtype: RandomWeightDType }> = {
  dense: {
    dtype: 'bfloat16',
    config: {
      ...BASE,
      eosTokenIds: [1],
      modelType: 'qwen3',
      hiddenSize: 64,
      intermediateSize: 96,
      numHiddenLayers: 2,
      numAttentionHeads: 4,
      numKeyValueHeads: 2,
      headDim: 16,
      tieWordEmbeddings: true,
    },
  },
  moe: {
    dtype: 'bfloat16',
    config: {
      ...BASE,
      eosTokenIds: [1],
      modelType: 'qwen3_moe',
      hiddenSize: 64,
      intermediateSize: 96,
      numHiddenLayers: 3,
      numAttentionHeads: 8,
      numKeyValueHeads: 2,
      headDim: 16,
      tieWordEmbeddings: false,
      // Layer 1 keeps a dense MLP: both block kinds in one model.
      moe: { numExperts: 8, numExpertsPerTok: 2, moeIntermediateSize: 32, normTopkProb: true, decoderSparseStep: 1, mlpOnlyLayers: [1] },
    },
  },
  'moe-fp8': {
    dtype: 'fp8',
    config: {
      ...BASE,
      eosTokenIds: [1],
      modelType: 'qwen3_moe',
      hiddenSize: 128,
      intermediateSize: 256,
      numHiddenLayers: 2,
      numAttentionHeads: 4,
      numKeyValueHeads: 2,
      headDim: 32,
      tieWordEmbeddings: false,
      moe: { numExperts: 4, numExpertsPerTok: 2, moeIntermediateSize: 128, normTopkProb: false, decoderSparseStep: 1, mlpOnlyLayers: [] },
    },
  },
};

const PROMPT = [5, 17, 300, 42, 99, 7, 250];
const DECODE_STEPS = 16;

function maxRelError(got: Float32Array, want: Float32Array): number {
  let scale = 0;
  for (const v of want) scale = Math.max(scale, Math.abs(v));
  let worst = 0;
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]) / scale);
  return worst;
}

function argmax(x: Float32Array): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
  return best;
}

async function logitsOf(m: LoadedModel, cache: ReturnType<LoadedModel['model']['newCache']>, ids: number[], lastOnly = true): Promise<Float32Array> {
  const input: Tensor = tensor(ids, { dtype: 'int32', device: m.model.device });
  const logits = await m.model.forward(input, cache, lastOnly);
  input.dispose();
  const values = (await logits.toArray()) as Float32Array;
  logits.dispose();
  return values;
}

describe.skipIf(!gpu.available)(`Qwen3 forward, WebGPU vs CPU ${gpu.skipReason}`, () => {
  const loaded: LoadedModel[] = [];
  const dirs: Record<string, string> = {};

  beforeAll(async () => {
    for (const [name, { config, dtype }] of Object.entries(CONFIGS)) {
      dirs[name] = join(mkdtempSync(join(tmpdir(), `tensorgpu-qwen3-${name}-`)));
      await writeRandomQwen3Checkpoint(dirs[name], config, { dtype, seed: 3 });
    }
  });

  afterAll(() => {
    for (const m of loaded) {
      m.model.dispose();
    }
  });

  async function load(name: string, device: 'cpu' | 'webgpu'): Promise<LoadedModel> {
    const m = await loadQwen3(dirs[name], { device, maxSequence: 64 });
    loaded.push(m);
    return m;
  }

  it.each(Object.keys(CONFIGS))('%s: prefill (every position) and 16 greedy decode steps match the CPU; greedy tokens identical', async (name) => {
    const cpu = await load(name, 'cpu');
    const webgpu = await load(name, 'webgpu');
    const cpuCache = cpu.model.newCache();
    const gpuCache = webgpu.model.newCache();
    try {
      const want = await logitsOf(cpu, cpuCache, PROMPT, false);
      const got = await logitsOf(webgpu, gpuCache, PROMPT, false);
      expect(got.length).toBe(PROMPT.length * CONFIGS[name].config.vocabSize);
      expect(maxRelError(got, want), `${name} prefill`).toBeLessThan(2e-3);
      const v = CONFIGS[name].config.vocabSize;
      let token = argmax(want.subarray((PROMPT.length - 1) * v));
      expect(argmax(got.subarray((PROMPT.length - 1) * v))).toBe(token);
      for (let step = 0; step < DECODE_STEPS; step++) {
        const w = await logitsOf(cpu, cpuCache, [token]);
        const g = await logitsOf(webgpu, gpuCache, [token]);
        expect(maxRelError(g, w), `${name} decode step ${step}`).toBeLessThan(2e-3);
        const next = argmax(w);
        expect(argmax(g), `${name} greedy token at step ${step}`).toBe(next);
        token = next;
      }
    } finally {
      cpuCache.dispose();
      gpuCache.dispose();
    }
  });

  it('prefill of every position equals feeding the tokens one by one through the KV cache (CPU and WebGPU)', async () => {
    for (const device of ['cpu', 'webgpu'] as const) {
      const m = await load('moe', device);
      const v = CONFIGS.moe.config.vocabSize;
      const whole = m.model.newCache();
      const stepwise = m.model.newCache();
      const all = await logitsOf(m, whole, PROMPT, false);
      for (let i = 0; i < PROMPT.length; i++) {
        const one = await logitsOf(m, stepwise, [PROMPT[i]]);
        expect(maxRelError(one, all.subarray(i * v, (i + 1) * v)), `${device} position ${i}`).toBeLessThan(1e-4);
      }
      whole.dispose();
      stepwise.dispose();
    }
  });

  it('the fused MoE block equals the per-expert loop (same weights, same device)', async () => {
    const m = await load('moe', 'webgpu');
    const results: Float32Array[] = [];
    for (const mode of ['fused', 'per-expert'] as const) {
      m.model.moeMode = mode;
      const cache = m.model.newCache();
      const prefill = await logitsOf(m, cache, PROMPT, false);
      const step = await logitsOf(m, cache, [argmax(prefill.subarray(prefill.length - CONFIGS.moe.config.vocabSize))]);
      results.push(prefill, step);
      cache.dispose();
    }
    m.model.moeMode = 'fused';
    expect(maxRelError(results[0], results[2])).toBeLessThan(1e-4);
    expect(maxRelError(results[1], results[3])).toBeLessThan(1e-4);
  });
});
