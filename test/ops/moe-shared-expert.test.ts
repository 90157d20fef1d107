// Qwen3.5-MoE's shared expert in the router: moeRoute / moeRouter with sharedExpert take E+1 logits (router rows),
// the last being shared_expert_gate's, and return [T, topK+1] whose last slot is (id E, sigmoid(gate logit)). The CPU
// is judged exactly against a float64 definition written here (softmax over the E routed logits, top-k, renorm, then
// the sigmoid slot), WebGPU against the CPU; and a whole MoE block with the shared expert stacked as expert E
// (moeRouter -> expertLinear swiglu -> expertLinear combine + residual) against a float64 MoE-with-shared-expert.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice, ShapeError, type DType, type Tensor } from '../../src/index.js';
import { FUSED_ROUTER_MAX_EXPERTS } from '../../src/kernels/moe/moe-route.js';
import { randomTensor, randomValues } from '../helpers/compare.js';
import { dispatchesOf, setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const f = Math.fround;

interface Route {
  ids: number[];
  weights: number[];
}

interface RouteCase {
  normalize: boolean;
  scale: number;
  bias?: ArrayLike<number>;
}

/**
 * The definition, logits [T, E+1] in float64: softmax over the first E (probabilities rounded to float32), top-k of
 * p + bias (float32 keys, ties to the lower id), weights p (/ float32 sum when normalize, then * scale), then slot k:
 * id E, sigmoid(logit E) rounded to float32. A row with a NaN or +Inf routed logit: ids 0..k-1, NaN weights.
 */
function routeByDefinition(logits: ArrayLike<number>, t: number, e: number, k: number, c: RouteCase): Route {
  const ids: number[] = [];
  const weights: number[] = [];
  for (let r = 0; r < t; r++) {
    const row = Array.from({ length: e }, (_, i) => logits[r * (e + 1) + i]);
    const gate = logits[r * (e + 1) + e];
    const max = Math.max(...row);
    if (row.some(Number.isNaN) || !Number.isFinite(max)) {
      ids.push(...Array.from({ length: k }, (_, j) => j));
      weights.push(...Array<number>(k).fill(NaN));
    } else {
      const ex = row.map((v) => Math.exp(v - max));
      const sum = ex.reduce((a, b) => a + b, 0);
      const p = ex.map((v) => f(v / sum));
      const key = p.map((v, i) => (c.bias ? f(v + c.bias[i]) : v));
      const chosen = key
        .map((_, i) => i)
        .sort((a, b) => key[b] - key[a] || a - b)
        .slice(0, k);
      let s = 0;
      for (const i of chosen) s = f(s + p[i]);
      ids.push(...chosen);
      weights.push(...chosen.map((i) => f((c.normalize ? f(p[i] / s) : p[i]) * c.scale)));
    }
    ids.push(e);
    weights.push(f(1 / (1 + Math.exp(-gate))));
  }
  return { ids, weights };
}

async function read(r: { ids: Tensor; weights: Tensor }): Promise<Route> {
  const out = { ids: Array.from((await r.ids.toArray()) as Int32Array), weights: Array.from((await r.weights.toArray()) as Float32Array) };
  r.ids.dispose();
  r.weights.dispose();
  return out;
}

/** Largest relative difference seen on WebGPU, reported once at the end (the tolerance's margin). */
let worstGpuRel = 0;

/** GPU weights: float32 exp and division a few ulps from the CPU's correctly rounded ones. */
function expectWeights(got: number[], want: number[], rel: number, label: string): void {
  expect(got.length, label).toBe(want.length);
  for (let i = 0; i < want.length; i++) {
    if (Number.isNaN(want[i])) {
      expect(got[i], `${label} [${i}]`).toBeNaN();
      continue;
    }
    const d = Math.abs(got[i] - want[i]);
    if (want[i] !== 0 && rel === GPU_REL) worstGpuRel = Math.max(worstGpuRel, d / Math.abs(want[i]));
    expect(d, `${label} [${i}]: ${got[i]} vs ${want[i]}`).toBeLessThanOrEqual(rel * Math.abs(want[i]) + 1e-30);
  }
}

const GPU_REL = 2e-6;

const options = (c: { normalize: boolean; scale: number }, bias?: Tensor): tg.RouteOpOptions => ({
  normalize: c.normalize,
  scale: c.scale,
  selectionBias: bias,
  sharedExpert: true,
});

describe(`moeRoute / moeRouter with a shared expert ${gpu.skipReason}`, () => {
  it.each([
    { t: 3, e: 37, k: 1, normalize: false, bias: false, scale: 1 },
    { t: 3, e: 37, k: 8, normalize: true, bias: true, scale: 1 },
    { t: 2, e: 37, k: 8, normalize: false, bias: false, scale: 2.5 },
    { t: 2, e: 256, k: 8, normalize: true, bias: false, scale: 1 },
    { t: 2, e: 256, k: 1, normalize: true, bias: true, scale: 1 },
    { t: 2, e: 256, k: 8, normalize: false, bias: true, scale: 1.5 },
  ])('$t tokens, $e experts + shared, top $k, normalize $normalize, bias $bias, scale $scale', async (c) => {
    const { t, e, k } = c;
    const logits = randomTensor([t, e + 1], 'float32', 'normal', 2);
    // Comparable to the probabilities (~1/E), so the bias reorders some choices without deciding them all.
    const bias = c.bias ? tg.tensor(randomValues(e, 'float32', 'normal', undefined, 2 / e), { shape: [e] }) : undefined;
    const lv = (await logits.toArray()) as Float32Array;
    const bv = bias && ((await bias.toArray()) as Float32Array);
    const plain = { normalize: c.normalize, scale: c.scale };
    const want = routeByDefinition(lv, t, e, k, { ...plain, bias: bv });
    if (bv) expect(routeByDefinition(lv, t, e, k, plain).ids, 'the bias must change the choice').not.toEqual(want.ids);

    const r = tg.moeRoute(logits, k, options(c, bias));
    expect(r.ids.shape).toEqual([t, k + 1]);
    expect(r.weights.shape).toEqual([t, k + 1]);
    expect(r.ids.dtype).toBe('int32');
    const cpu = await read(r);
    expect(cpu.ids).toEqual(want.ids);
    expect(cpu.weights).toEqual(want.weights);

    // The fused router: x [T, H] . W [E+1, H]^T, the gate's row last.
    const h = 24;
    const x = randomTensor([t, h]);
    const w = randomTensor([e + 1, h], 'bfloat16', 'normal', 0.5);
    const chain = await read(tg.moeRoute(tg.linear(x, w), k, options(c, bias)));
    const fused = await read(tg.moeRouter(x, w, k, options(c, bias)));
    expect(fused.ids).toEqual(chain.ids);
    expectWeights(fused.weights, chain.weights, 1e-6, 'cpu fused');
    expect(fused.ids.filter((_, i) => i % (k + 1) === k)).toEqual(Array<number>(t).fill(e));

    if (gpu.available) {
      const [gl, gx, gw] = await Promise.all([logits.to('webgpu'), x.to('webgpu'), w.to('webgpu')]);
      const gb = bias && (await bias.to('webgpu'));
      const got = await read(tg.moeRoute(gl, k, options(c, gb)));
      expect(got.ids).toEqual(cpu.ids);
      expectWeights(got.weights, cpu.weights, GPU_REL, 'webgpu');
      const gotFused = await read(tg.moeRouter(gx, gw, k, options(c, gb)));
      expect(gotFused.ids).toEqual(fused.ids);
      expectWeights(gotFused.weights, fused.weights, 1e-5, 'webgpu fused'); // the logits' f32 sums differ too
      [gl, gx, gw, gb].forEach((u) => u?.dispose());
    }
    [logits, bias, x, w].forEach((u) => u?.dispose());
  });

  it('a strided logits view routes the same as its contiguous copy', async () => {
    const [t, e, k] = [3, 37, 4];
    const wide = randomTensor([e + 1 + 5, t], 'float32', 'normal', 2);
    const view = wide.transpose(0, 1).narrow(1, 2, e + 1); // [t, e+1], strides [1, t]
    const want = routeByDefinition((await view.contiguous().toArray()) as Float32Array, t, e, k, { normalize: true, scale: 1 });
    const cpu = await read(tg.moeRoute(view, k, options({ normalize: true, scale: 1 })));
    expect(cpu).toEqual(want);
    if (gpu.available) {
      const gw = await wide.to('webgpu');
      const got = await read(tg.moeRoute(gw.transpose(0, 1).narrow(1, 2, e + 1), k, options({ normalize: true, scale: 1 })));
      expect(got.ids).toEqual(want.ids);
      expectWeights(got.weights, want.weights, GPU_REL, 'webgpu strided');
      gw.dispose();
    }
    wide.dispose();
  });

  it('a NaN routed logit leaves the shared slot its sigmoid; a NaN gate logit only the shared slot NaN', async () => {
    const e = 5;
    const k = 2;
    // row 0: NaN routed logit; row 1: NaN gate; row 2: +Inf routed logit (no softmax); rows 3, 4: gate -Inf, +Inf.
    const rows = [
      [0.5, NaN, 1, -1, 2, 0.75],
      [0.5, 0.25, 1, -1, 2, NaN],
      [0.5, Infinity, 1, -1, 2, -1.5],
      [0.5, 0.25, 1, -1, 2, -Infinity],
      [3, 0.25, 1, -1, 2, Infinity],
    ];
    const logits = tg.tensor(rows.flat(), { shape: [rows.length, e + 1] });
    const want = routeByDefinition(rows.flat(), rows.length, e, k, { normalize: true, scale: 1 });
    expect(want.ids).toEqual([0, 1, 5, 4, 2, 5, 0, 1, 5, 4, 2, 5, 0, 4, 5]);
    expect(want.weights[2]).toBe(f(1 / (1 + Math.exp(-0.75))));
    expect(want.weights[5]).toBeNaN();
    expect(want.weights.slice(9, 12)).toEqual([want.weights[3], want.weights[4], 0]);
    expect(want.weights[14]).toBe(1);
    const cpu = await read(tg.moeRoute(logits, k, options({ normalize: true, scale: 1 })));
    expect(cpu.ids).toEqual(want.ids);
    expect(cpu.weights).toEqual(want.weights);
    // Fused: a NaN in the gate's router row makes every gate logit NaN and nothing else.
    const x = randomTensor([2, 8]);
    const w = tg.cat([randomTensor([e, 8]), tg.tensor([1, 2, NaN, 0, 0, 0, 0, 0], { shape: [1, 8] })], 0);
    const fused = await read(tg.moeRouter(x, w, k, options({ normalize: true, scale: 1 })));
    expect(fused.ids.filter((_, i) => i % 3 === 2)).toEqual([e, e]);
    expect(fused.weights.filter((_, i) => i % 3 === 2).every(Number.isNaN)).toBe(true);
    expect(fused.weights.filter((_, i) => i % 3 !== 2).some(Number.isNaN)).toBe(false);
    if (gpu.available) {
      const got = await read(tg.moeRoute(await logits.to('webgpu'), k, options({ normalize: true, scale: 1 })));
      expect(got.ids).toEqual(cpu.ids);
      expectWeights(got.weights, cpu.weights, GPU_REL, 'webgpu');
      const [gx, gw] = await Promise.all([x.to('webgpu'), w.to('webgpu')]);
      const gotFused = await read(tg.moeRouter(gx, gw, k, options({ normalize: true, scale: 1 })));
      expect(gotFused.ids).toEqual(fused.ids);
      expectWeights(gotFused.weights, fused.weights, 1e-5, 'webgpu fused');
      [gx, gw].forEach((u) => u.dispose());
    }
    [logits, x, w].forEach((u) => u.dispose());
  });

  it.skipIf(!gpu.available)('E+1 router rows past the fused limit take the linear + route path, same result', async () => {
    const [t, e, k] = [2, FUSED_ROUTER_MAX_EXPERTS, 8]; // E+1 = limit + 1 rows
    const x = randomTensor([t, 8]);
    const w = randomTensor([e + 1, 8], 'float32', 'normal', 2);
    const cpu = await read(tg.moeRouter(x, w, k, options({ normalize: true, scale: 1 })));
    const [gx, gw] = await Promise.all([x.to('webgpu'), w.to('webgpu')]);
    const got = await read(tg.moeRouter(gx, gw, k, options({ normalize: true, scale: 1 })));
    expect(got.ids).toEqual(cpu.ids);
    expect(got.ids[k]).toBe(e);
    expectWeights(got.weights, cpu.weights, 1e-5, 'webgpu unfused');
    [x, w, gx, gw].forEach((u) => u.dispose());
  });

  it('rejects bad shapes and options with typed errors', () => {
    const logits = randomTensor([2, 9]); // E = 8 + the gate
    expect(() => tg.moeRoute(logits, 9, { sharedExpert: true })).toThrow(RangeError);
    expect(() => tg.moeRoute(logits, 9, { sharedExpert: true })).toThrow(/topK must be in 1\.\.8/);
    expect(() => tg.moeRoute(logits, 0, { sharedExpert: true })).toThrow(RangeError);
    expect(() => tg.moeRoute(logits, 2, { sharedExpert: true, selectionBias: tg.zeros([9]) })).toThrow(ShapeError);
    expect(() => tg.moeRoute(logits, 2, { sharedExpert: true, selectionBias: tg.zeros([9]) })).toThrow(/selectionBias must be \[8\].*shared/);
    expect(() => tg.moeRoute(randomTensor([2, 1]), 1, { sharedExpert: true })).toThrow(ShapeError);
    expect(() => tg.moeRoute(logits, 2, { sharedExpert: 1 as unknown as boolean })).toThrow(TypeError);
    const x = randomTensor([2, 16]);
    expect(() => tg.moeRouter(x, randomTensor([9, 16]), 9, { sharedExpert: true })).toThrow(/topK must be in 1\.\.8/);
    expect(() => tg.moeRouter(x, randomTensor([9, 16]), 2, { sharedExpert: true, selectionBias: tg.zeros([9]) })).toThrow(ShapeError);
    expect(() => tg.moeRouter(x, randomTensor([1, 16]), 1, { sharedExpert: true })).toThrow(ShapeError);
    // Without the option, the same shapes are plain routers over 9 experts.
    const plain = tg.moeRoute(logits, 9);
    expect(plain.ids.shape).toEqual([2, 9]);
    [plain.ids, plain.weights, logits, x].forEach((u) => u.dispose());
  });
});

// ---- the whole block --------------------------------------------------------------------------------------------------

interface Block {
  t: number;
  h: number;
  i: number;
  e: number;
  k: number;
  x: Tensor;
  router: Tensor; // [E+1, H]: the router rows, then shared_expert_gate
  gateUp: Tensor; // [E+1, 2I, H]: expert e's gate rows then up rows; expert E the shared expert
  down: Tensor; // [E+1, H, I]
  residual: Tensor;
}

function makeBlock(t: number, h: number, i: number, e: number, k: number, wDtype: DType): Block {
  return {
    t,
    h,
    i,
    e,
    k,
    x: randomTensor([t, h]),
    router: randomTensor([e + 1, h], 'float32', 'normal', 0.5),
    gateUp: randomTensor([e + 1, 2 * i, h], wDtype, 'normal', 0.3),
    down: randomTensor([e + 1, h, i], wDtype, 'normal', 0.3),
    residual: randomTensor([t, h]),
  };
}

const ROUTING = { normalize: true, scale: 1, sharedExpert: true } as const;

/** What a model runs: fusedMoe with k+1 slots. */
function block(x: Tensor, router: Tensor, gateUp: Tensor, down: Tensor, residual: Tensor, k: number): Tensor {
  return tg.tidy(() => {
    const { ids, weights } = tg.moeRouter(x, router, k, ROUTING);
    const act = tg.expertLinear(x, gateUp, ids, { activation: 'swiglu' });
    return tg.expertLinear(act, down, ids, { combine: weights, residual });
  });
}

/**
 * Qwen3.5-MoE's sparse block by definition, float64 from the values as stored: softmax over the E router logits,
 * top-k, renormalized; out = residual + sum_k w_k mlp_k(x) + sigmoid(g . x) * shared_mlp(x), mlp(x) =
 * down(silu(gate x) * up x). Also returns mag, sum of |terms|, for the tolerance.
 */
async function blockByDefinition(b: Block): Promise<{ v: Float64Array; mag: Float64Array }> {
  const vals = async (u: Tensor) => Float64Array.from((await u.toArray()) as ArrayLike<number>);
  const [x, r, gu, dn, res] = await Promise.all([b.x, b.router, b.gateUp, b.down, b.residual].map(vals));
  const { t, h, i: inter, e, k } = b;
  const v = new Float64Array(t * h);
  const mag = new Float64Array(t * h);
  const mlp = (tok: number, ex: number, w: number) => {
    const act = new Float64Array(inter);
    for (let j = 0; j < inter; j++) {
      let g = 0;
      let u = 0;
      for (let c = 0; c < h; c++) {
        g += gu[(ex * 2 * inter + j) * h + c] * x[tok * h + c];
        u += gu[(ex * 2 * inter + inter + j) * h + c] * x[tok * h + c];
      }
      act[j] = (g / (1 + Math.exp(-g))) * u;
    }
    for (let o = 0; o < h; o++) {
      let y = 0;
      let m = 0;
      for (let j = 0; j < inter; j++) {
        y += dn[(ex * h + o) * inter + j] * act[j];
        m += Math.abs(dn[(ex * h + o) * inter + j] * act[j]);
      }
      v[tok * h + o] += w * y;
      mag[tok * h + o] += Math.abs(w) * m;
    }
  };
  for (let tok = 0; tok < t; tok++) {
    const logits = Array.from({ length: e + 1 }, (_, ex) => {
      let s = 0;
      for (let c = 0; c < h; c++) s += r[ex * h + c] * x[tok * h + c];
      return s;
    });
    const max = Math.max(...logits.slice(0, e));
    const ex = logits.slice(0, e).map((l) => Math.exp(l - max));
    const sum = ex.reduce((a, c) => a + c, 0);
    const p = ex.map((q) => q / sum);
    const chosen = p
      .map((_, j) => j)
      .sort((a, c) => p[c] - p[a] || a - c)
      .slice(0, k);
    const chosenSum = chosen.reduce((a, j) => a + p[j], 0);
    for (const j of chosen) mlp(tok, j, p[j] / chosenSum);
    mlp(tok, e, 1 / (1 + Math.exp(-logits[e])));
    for (let o = 0; o < h; o++) {
      v[tok * h + o] += res[tok * h + o];
      mag[tok * h + o] += Math.abs(res[tok * h + o]);
    }
  }
  return { v, mag };
}

function expectWithin(got: ArrayLike<number>, want: Float64Array, mag: Float64Array, rel: number, label: string): void {
  expect(got.length).toBe(want.length);
  for (let j = 0; j < want.length; j++) {
    expect(Math.abs(got[j] - want[j]), `${label} [${j}]: ${got[j]} vs ${want[j]}`).toBeLessThanOrEqual(rel * mag[j] + 1e-7);
  }
}

describe(`an MoE block with the shared expert stacked as expert E ${gpu.skipReason}`, () => {
  it.each([
    { t: 3, h: 32, i: 16, e: 37, k: 8, w: 'float32' as const },
    { t: 2, h: 16, i: 8, e: 256, k: 8, w: 'bfloat16' as const },
    { t: 2, h: 16, i: 8, e: 37, k: 1, w: 'float32' as const },
  ])('$t tokens, H $h, I $i, $e experts + shared, top $k, $w weights', async ({ t, h, i, e, k, w }) => {
    const b = makeBlock(t, h, i, e, k, w);
    const { v, mag } = await blockByDefinition(b);
    // The router's weights are float32 (a ulp of relative error each), the swiglu activation is stored as float32.
    const cpu = block(b.x, b.router, b.gateUp, b.down, b.residual, k);
    expect(cpu.shape).toEqual([t, h]);
    expectWithin((await cpu.toArray()) as Float32Array, v, mag, 1e-6, 'cpu');
    cpu.dispose();
    if (gpu.available) {
      const g = await Promise.all([b.x, b.router, b.gateUp, b.down, b.residual].map((u) => u.to('webgpu')));
      const out = block(g[0], g[1], g[2], g[3], g[4], k);
      expectWithin((await out.toArray()) as Float32Array, v, mag, 1e-5, 'webgpu');
      out.dispose();
      g.forEach((u) => u.dispose());
    }
    [b.x, b.router, b.gateUp, b.down, b.residual].forEach((u) => u.dispose());
  });

  it.skipIf(!gpu.available)('is three dispatches on WebGPU (router with the gate, gate|up + swiglu, down + combine + residual)', async () => {
    const b = makeBlock(1, 32, 16, 37, 8, 'bfloat16');
    const n = await dispatchesOf([b.x, b.router, b.gateUp, b.down, b.residual], (x, r, gu, dn, res) => block(x, r, gu, dn, res, b.k));
    expect(n).toBe(3);
    [b.x, b.router, b.gateUp, b.down, b.residual].forEach((u) => u.dispose());
  });

  it('reports the WebGPU weights margin', () => {
    if (gpu.available) console.log(`moe-shared-expert: worst WebGPU route weight relative difference ${worstGpuRel.toExponential(2)} (tolerance ${GPU_REL})`);
  });
});
