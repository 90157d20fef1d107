// moeExperts: the routed SwiGLU experts of an MoE block as one differentiable op (grouped expert GEMMs forward and
// backward). Checked against central differences (CPU), against the same block composed per expert from linear /
// swiglu / one-hot gathers (values and gradients, both backends), WebGPU against the CPU, with experts that get no
// tokens, top-1 and top-k > 1, the per-slot GEMV (T*k < 32) and the grouped GEMM (T*k >= 32), bfloat16 weights; and
// its dispatch count, which must not grow with the number of experts.
import { describe, expect, it } from 'vitest';
import { gpuCounters, moeExperts, noGrad, setDefaultDevice, swiglu, swigluBackward, swigluGrad, synchronize, tensor, type Tensor } from '../../src/index.js';
import { expectClose, randomTensor } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

interface Case {
  t: number;
  h: number;
  i: number;
  e: number;
  k: number;
  /** Experts no slot chooses. */
  idle: readonly number[];
  wdtype?: 'float32' | 'bfloat16';
}

/** Random distinct experts per token, never an idle one. */
function randomIds(c: Case, seed: number): number[] {
  const pool = Array.from({ length: c.e }, (_, e) => e).filter((e) => !c.idle.includes(e));
  const ids: number[] = [];
  let s = seed;
  for (let t = 0; t < c.t; t++) {
    const left = [...pool];
    for (let j = 0; j < c.k; j++) {
      s = (s * 1103515245 + 12345) >>> 0;
      ids.push(left.splice(s % left.length, 1)[0]);
    }
  }
  return ids;
}

interface Inputs {
  x: Tensor;
  gateUp: Tensor;
  down: Tensor;
  weights: Tensor;
  residual: Tensor;
  ids: number[];
}

function inputs(c: Case, seed: number): Inputs {
  const wd = c.wdtype ?? 'float32';
  return {
    x: randomTensor([c.t, c.h]),
    gateUp: randomTensor([c.e, 2 * c.i, c.h], 'float32', 'normal', 0.5).to(wd),
    down: randomTensor([c.e, c.h, c.i], 'float32', 'normal', 0.5).to(wd),
    weights: randomTensor([c.t, c.k], 'float32', 'positive'),
    residual: randomTensor([c.t, c.h]),
    ids: randomIds(c, seed),
  };
}

/** The block from per-expert ops (as the composed training path): gathers and scatters by one-hot matmuls. */
function composed(x: Tensor, gateUp: Tensor, down: Tensor, ids: readonly number[], weights: Tensor, residual: Tensor, k: number): Tensor {
  const [t] = x.shape;
  let out = residual;
  for (let e = 0; e < gateUp.shape[0]; e++) {
    const slots = ids.flatMap((id, s) => (id === e ? [s] : []));
    if (slots.length === 0) continue;
    const pick = new Float32Array(slots.length * t);
    const pickSlot = new Float32Array(slots.length * t * k);
    slots.forEach((s, r) => {
      pick[r * t + Math.floor(s / k)] = 1;
      pickSlot[r * t * k + s] = 1;
    });
    const gather = tensor(pick, { shape: [slots.length, t], device: x.device });
    const gatherSlot = tensor(pickSlot, { shape: [slots.length, t * k], device: x.device });
    const xe = gather.matmul(x);
    const act = swiglu(xe.matmul(gateUp.select(0, e).to('float32').transpose(0, 1)));
    const ye = act.matmul(down.select(0, e).to('float32').transpose(0, 1)).mul(gatherSlot.matmul(weights.reshape([t * k, 1])));
    out = out.add(gather.transpose(0, 1).matmul(ye));
  }
  return out;
}

/** Output and the gradients of sum(out * r) w.r.t. x, weights and residual. */
async function run(fused: boolean, inp: Inputs, c: Case, device: 'cpu' | 'webgpu', r: Tensor) {
  const on = async (t: Tensor) => (device === 'cpu' ? t.clone() : await t.to('webgpu'));
  const [x, weights, residual, gateUp, down, rr] = await Promise.all([inp.x, inp.weights, inp.residual, inp.gateUp, inp.down, r].map(on));
  for (const t of [x, weights, residual]) t.requiresGrad_();
  const ids = tensor(Int32Array.from(inp.ids), { shape: [c.t, c.k], device });
  const out = fused ? moeExperts(x, gateUp, down, ids, weights, { residual }) : composed(x, gateUp, down, inp.ids, weights, residual, c.k);
  out.mul(rr).sum().backward();
  const result = {
    out: await out.toArray(),
    dx: await x.grad!.toArray(),
    dw: await weights.grad!.toArray(),
    dr: await residual.grad!.toArray(),
  };
  for (const t of [x, weights, residual, gateUp, down, rr, ids, out]) t.dispose();
  return result;
}

const CASES: Record<string, Case> = {
  'top-1, T*k < 32 (per-slot GEMV), two idle experts': { t: 5, h: 8, i: 6, e: 6, k: 1, idle: [1, 4] },
  'top-3, T*k < 32, one idle expert': { t: 6, h: 12, i: 10, e: 5, k: 3, idle: [2] },
  'top-4, T*k = 64 (grouped GEMM), idle experts': { t: 16, h: 24, i: 20, e: 12, k: 4, idle: [0, 7, 11] },
  'top-2, T*k = 48, bfloat16 weights': { t: 24, h: 16, i: 12, e: 8, k: 2, idle: [5], wdtype: 'bfloat16' },
};

describe('moeExperts: fused vs composed per expert, gradients (CPU)', () => {
  it('matches central differences in x, the routing weights and the residual', async () => {
    const c: Case = { t: 3, h: 4, i: 3, e: 4, k: 2, idle: [3] };
    const inp = inputs(c, 7);
    const ids = tensor(Int32Array.from(inp.ids), { shape: [c.t, c.k] });
    const r = randomTensor([c.t, c.h]);
    const f = (x: Tensor, w: Tensor, res: Tensor) => moeExperts(x, inp.gateUp, inp.down, ids, w, { residual: res }).mul(r).sum();
    const leaves = [inp.x, inp.weights, inp.residual].map((t) => t.detach().requiresGrad_());
    f(leaves[0], leaves[1], leaves[2]).backward();
    const eps = 1e-2;
    for (let a = 0; a < 3; a++) {
      const base = Array.from(await leaves[a].toArray());
      const numeric = new Float64Array(base.length);
      for (let n = 0; n < base.length; n++) {
        const at = async (d: number) => {
          const v = base.slice();
          v[n] += d;
          const moved = tensor(v, { shape: leaves[a].shape });
          const args = leaves.map((l, b) => (b === a ? moved : l.detach())) as [Tensor, Tensor, Tensor];
          const y = noGrad(() => f(...args));
          const value = await y.item();
          for (const t of [y, moved]) t.dispose();
          return value;
        };
        numeric[n] = ((await at(eps)) - (await at(-eps))) / (2 * eps);
      }
      expectClose(await leaves[a].grad!.toArray(), numeric, { atol: 3e-3, rtol: 1e-2 }, `d/dinput${a}`);
    }
  });

  for (const [name, c] of Object.entries(CASES)) {
    it(name, async () => {
      const inp = inputs(c, 11);
      const r = randomTensor([c.t, c.h]);
      const fused = await run(true, inp, c, 'cpu', r);
      const ref = await run(false, inp, c, 'cpu', r);
      for (const key of ['out', 'dx', 'dw', 'dr'] as const) expectClose(fused[key], ref[key], { atol: 1e-4, rtol: 1e-4 }, `${name} ${key}`);
    });
  }

  it('refuses expert weights that require grad (their gradients are not computed here)', () => {
    const c: Case = { t: 2, h: 4, i: 2, e: 2, k: 1, idle: [] };
    const inp = inputs(c, 3);
    const ids = tensor(Int32Array.from(inp.ids), { shape: [2, 1] });
    expect(() => moeExperts(inp.x, inp.gateUp.requiresGrad_(), inp.down, ids, inp.weights)).toThrow(/expert weights require grad/);
  });
});

describe('swigluBackward: one kernel for the composed swigluGrad', () => {
  for (const device of ['cpu', 'webgpu'] as const) {
    it.skipIf(device === 'webgpu' && !gpu.available)(`${device}: float32 and bfloat16 inputs, a strided gradient`, async () => {
      for (const dtype of ['float32', 'bfloat16'] as const) {
        const x = await randomTensor([7, 2 * 9], 'float32', 'normal', 2)
          .to(dtype)
          .to(device);
        const g = await randomTensor([9, 7]).to(device);
        const gt = g.transpose(0, 1);
        const got = swigluBackward(x, gt);
        const want = swigluGrad(x, gt);
        expect(got.dtype).toBe('float32');
        expectClose(await got.toArray(), await want.toArray(), { atol: 1e-6, rtol: 1e-5 }, `${device} ${dtype}`);
        for (const t of [x, g, got, want]) t.dispose();
      }
    });
  }
});

describe.skipIf(!gpu.available)(`moeExperts on WebGPU vs the CPU ${gpu.skipReason}`, () => {
  for (const [name, c] of Object.entries(CASES)) {
    it(name, async () => {
      const inp = inputs(c, 5);
      const r = randomTensor([c.t, c.h]);
      const want = await run(true, inp, c, 'cpu', r);
      const got = await run(true, inp, c, 'webgpu', r);
      const composedGpu = await run(false, inp, c, 'webgpu', r);
      for (const key of ['out', 'dx', 'dw', 'dr'] as const) {
        expectClose(got[key], want[key], { atol: 2e-4, rtol: 2e-4 }, `${name} ${key}`);
        expectClose(composedGpu[key], want[key], { atol: 2e-4, rtol: 2e-4 }, `${name} composed ${key}`);
      }
    });
  }

  it('forward + backward dispatches do not grow with the number of experts', async () => {
    const count = async (e: number) => {
      const c: Case = { t: 16, h: 16, i: 8, e, k: 4, idle: [] };
      const inp = inputs(c, 9);
      const r = randomTensor([c.t, c.h]);
      await run(true, inp, c, 'webgpu', r); // pipelines
      await synchronize();
      const before = gpuCounters().dispatches;
      await run(true, inp, c, 'webgpu', r);
      return gpuCounters().dispatches - before;
    };
    const [few, many] = [await count(4), await count(32)];
    expect(many).toBe(few);
    // Forward 6 (two grouped GEMMs: plan, GEMM, combine; swiglu) + backward + the test's own mul, sum, seed.
    expect(many).toBeLessThan(30);
  });
});
