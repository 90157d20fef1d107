// LFM2-MoE routing through moeRoute / moeRouter: sigmoid scores, top-k of score + expert_bias (the bias picks, the
// unbiased scores weigh), weights / (sum + 1e-6) * routed_scaling_factor; against transformers'
// Lfm2MoeSparseMoeBlock.route_tokens_to_experts written out in float64, on the CPU exactly and on WebGPU by id.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice, type Tensor } from '../../src/index.js';
import { randomTensor, randomValues } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

interface Route {
  ids: number[];
  weights: number[];
}

/** route_tokens_to_experts: sigmoid, topk(p + bias), gather p, / (sum + 1e-6), * scale (float32 roundings as torch). */
function lfm2Route(logits: ArrayLike<number>, bias: ArrayLike<number> | undefined, t: number, e: number, k: number, normalize: boolean, scale: number): Route {
  const f = Math.fround;
  const ids: number[] = [];
  const weights: number[] = [];
  for (let r = 0; r < t; r++) {
    const p = Array.from({ length: e }, (_, i) => f(1 / (1 + Math.exp(-logits[r * e + i]))));
    const key = p.map((v, i) => (bias ? f(v + bias[i]) : v));
    const chosen = key
      .map((_, i) => i)
      .sort((a, b) => key[b] - key[a] || a - b)
      .slice(0, k);
    let sum = 0;
    for (const i of chosen) sum = f(sum + p[i]);
    const denominator = f(sum + 1e-6);
    ids.push(...chosen);
    weights.push(...chosen.map((i) => f((normalize ? f(p[i] / denominator) : p[i]) * scale)));
  }
  return { ids, weights };
}

const LFM2 = (bias: Tensor | undefined, normalize = true, scale = 1) => ({
  scoring: 'sigmoid' as const,
  selectionBias: bias,
  normalize,
  normalizeEps: 1e-6,
  scale,
});

async function read(r: { ids: Tensor; weights: Tensor }): Promise<Route> {
  const out = { ids: Array.from((await r.ids.toArray()) as Int32Array), weights: Array.from((await r.weights.toArray()) as Float32Array) };
  r.ids.dispose();
  r.weights.dispose();
  return out;
}

function expectWeights(got: number[], want: number[], rel: number, label: string): void {
  expect(got.length).toBe(want.length);
  for (let i = 0; i < want.length; i++) {
    if (Number.isNaN(want[i])) expect(got[i], label).toBeNaN();
    else expect(Math.abs(got[i] - want[i]), `${label} [${i}]: ${got[i]} vs ${want[i]}`).toBeLessThanOrEqual(rel * Math.abs(want[i]) + 1e-30);
  }
}

describe(`sigmoid routing with a selection bias ${gpu.skipReason}`, () => {
  it.each([
    { t: 5, e: 32, k: 4, normalize: true, scale: 1 },
    { t: 3, e: 7, k: 3, normalize: false, scale: 2.5 },
    { t: 2, e: 130, k: 8, normalize: true, scale: 1.5 },
  ])('$t tokens, $e experts, top $k, normalize $normalize, scale $scale', async ({ t, e, k, normalize, scale }) => {
    const logits = randomTensor([t, e], 'float32', 'normal', 2);
    const bias = tg.tensor(randomValues(e, 'float32', 'normal', undefined, 0.3), { shape: [e] });
    const lv = (await logits.toArray()) as Float32Array;
    const bv = (await bias.toArray()) as Float32Array;
    const want = lfm2Route(lv, bv, t, e, k, normalize, scale);
    const cpu = await read(tg.moeRoute(logits, k, LFM2(bias, normalize, scale)));
    expect(cpu.ids).toEqual(want.ids);
    expect(cpu.weights).toEqual(want.weights);
    // The bias must matter here, or the test could not tell biased from unbiased selection.
    const unbiased = lfm2Route(lv, undefined, t, e, k, normalize, scale);
    expect(unbiased.ids).not.toEqual(want.ids);
    if (gpu.available) {
      const [gl, gb] = [await logits.to('webgpu'), await bias.to('webgpu')];
      const got = await read(tg.moeRoute(gl, k, LFM2(gb, normalize, scale)));
      expect(got.ids).toEqual(cpu.ids);
      expectWeights(got.weights, cpu.weights, 4e-6, 'webgpu');
      gl.dispose();
      gb.dispose();
    }
  });

  it('keys below -1 (a strongly negative bias) are still chosen in order', async () => {
    const logits = tg.tensor([0.5, -0.5, 1, 2], { shape: [1, 4] });
    const bias = tg.tensor([-5, -3, -4, -6], { shape: [4] });
    const want = lfm2Route([0.5, -0.5, 1, 2], [-5, -3, -4, -6], 1, 4, 3, true, 1);
    expect(want.ids).toEqual([1, 2, 0]);
    const cpu = await read(tg.moeRoute(logits, 3, LFM2(bias)));
    expect(cpu).toEqual(want);
    if (gpu.available) {
      const got = await read(tg.moeRoute(await logits.to('webgpu'), 3, LFM2(await bias.to('webgpu'))));
      expect(got.ids).toEqual(want.ids);
      expectWeights(got.weights, want.weights, 4e-6, 'webgpu');
    }
  });

  it('moeRouter (router GEMV fused) equals moeRoute of linear, on both devices', async () => {
    const x = randomTensor([3, 48]);
    const w = randomTensor([32, 48], 'bfloat16');
    const bias = tg.tensor(randomValues(32, 'float32', 'normal', undefined, 0.2), { shape: [32] });
    const chain = await read(tg.moeRoute(tg.linear(x, w), 4, LFM2(bias)));
    const fused = await read(tg.moeRouter(x, w, 4, LFM2(bias)));
    expect(fused.ids).toEqual(chain.ids);
    expectWeights(fused.weights, chain.weights, 1e-6, 'cpu fused');
    if (gpu.available) {
      const got = await read(tg.moeRouter(await x.to('webgpu'), await w.to('webgpu'), 4, LFM2(await bias.to('webgpu'))));
      expect(got.ids).toEqual(chain.ids);
      expectWeights(got.weights, chain.weights, 1e-5, 'webgpu fused');
    }
  });

  it('a NaN logit makes the row undefined; infinite logits are scores 0 and 1', async () => {
    const logits = tg.tensor([NaN, 0, 1, 2, /* row 1 */ -Infinity, Infinity, 0, 1], { shape: [2, 4] });
    const cpu = await read(tg.moeRoute(logits, 2, LFM2(undefined)));
    expect(cpu.ids).toEqual([0, 1, 1, 3]);
    expect(Number.isNaN(cpu.weights[0]) && Number.isNaN(cpu.weights[1])).toBe(true);
    const s1 = Math.fround(1 / (1 + Math.exp(-1)));
    expectWeights(
      cpu.weights.slice(2),
      [Math.fround(1 / Math.fround(Math.fround(1 + s1) + 1e-6)), Math.fround(s1 / Math.fround(Math.fround(1 + s1) + 1e-6))],
      0,
      'cpu',
    );
    if (gpu.available) {
      const got = await read(tg.moeRoute(await logits.to('webgpu'), 2, LFM2(undefined)));
      expect(got.ids).toEqual(cpu.ids);
      expectWeights(got.weights, cpu.weights, 4e-6, 'webgpu');
    }
  });

  it('rejects a bias of the wrong shape or dtype, and bad options', () => {
    const logits = randomTensor([2, 8]);
    expect(() => tg.moeRoute(logits, 2, LFM2(tg.zeros([7])))).toThrow(/selectionBias must be \[8\]/);
    expect(() => tg.moeRoute(logits, 2, LFM2(tg.zeros([8], { dtype: 'bfloat16' })))).toThrow(/does not take bfloat16/);
    expect(() => tg.moeRoute(logits, 2, { scoring: 'tanh' as 'sigmoid' })).toThrow(/scoring must be/);
    expect(() => tg.moeRoute(logits, 2, { normalizeEps: -1 })).toThrow(/normalizeEps/);
    expect(() => tg.moeRoute(logits, 2, { scale: NaN })).toThrow(/scale must be finite/);
  });
});
