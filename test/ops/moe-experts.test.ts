// moeExperts: the routed SwiGLU experts of an MoE block as one differentiable op (grouped expert GEMMs forward and
// backward). Checked against central differences (CPU), against the same block composed per expert from linear /
// swiglu / one-hot gathers (values and gradients, both backends), WebGPU against the CPU, with experts that get no
// tokens, top-1 and top-k > 1, the per-slot GEMV (T*k < 32) and the grouped GEMM (T*k >= 32), bfloat16 weights, the
// expert weights' gradients (full fine-tuning: exact zeros for an idle expert); its dispatch count, which must not
// grow with the number of experts; and expertWeightGrad (the grouped weight-gradient kernel) on WebGPU against its
// CPU oracle: T = 1, N and K past one 64-wide tile, more than 64 slots an expert, strided and bfloat16 inputs.
import { describe, expect, it } from 'vitest';
import {
  expertLinear,
  expertWeightGrad,
  gpuCounters,
  moeExperts,
  setDefaultDevice,
  swiglu,
  swigluBackward,
  swigluGrad,
  synchronize,
  tensor,
  type Tensor,
} from '../../src/index.js';
import { expectClose, randomTensor } from '../helpers/compare.js';
import { gradcheck } from '../helpers/gradcheck.js';
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

/** Output and the gradients of sum(out * r) w.r.t. x, weights and residual (and the expert weights: full fine-tuning). */
async function run(fused: boolean, inp: Inputs, c: Case, device: 'cpu' | 'webgpu', r: Tensor, expertGrads = true) {
  const on = async (t: Tensor) => (device === 'cpu' ? t.clone() : await t.to('webgpu'));
  const [x, weights, residual, gateUp, down, rr] = await Promise.all([inp.x, inp.weights, inp.residual, inp.gateUp, inp.down, r].map(on));
  for (const t of [x, weights, residual, ...(expertGrads ? [gateUp, down] : [])]) t.requiresGrad_();
  const ids = tensor(Int32Array.from(inp.ids), { shape: [c.t, c.k], device });
  const out = fused ? moeExperts(x, gateUp, down, ids, weights, { residual }) : composed(x, gateUp, down, inp.ids, weights, residual, c.k);
  out.mul(rr).sum().backward();
  // An expert no token chose gets no gradient on the composed path (the fused one gives zeros).
  const grad = async (t: Tensor) => (t.grad ? await t.grad.toArray() : new Float32Array(t.numel));
  const result = {
    out: await out.toArray(),
    dx: await x.grad!.toArray(),
    dw: await weights.grad!.toArray(),
    dr: await residual.grad!.toArray(),
    dGateUp: expertGrads ? await grad(gateUp) : new Float32Array(0),
    dDown: expertGrads ? await grad(down) : new Float32Array(0),
    gradDtypes: expertGrads ? [gateUp.grad?.dtype, down.grad?.dtype] : [],
  };
  for (const t of [x, weights, residual, gateUp, down, rr, ids, out]) t.dispose();
  return result;
}

const CASES: Record<string, Case> = {
  'top-1, T*k < 32 (per-slot GEMV), two idle experts': { t: 5, h: 8, i: 6, e: 6, k: 1, idle: [1, 4] },
  'top-3, T*k < 32, one idle expert': { t: 6, h: 12, i: 10, e: 5, k: 3, idle: [2] },
  'top-4, T*k = 64 (grouped GEMM), idle experts': { t: 16, h: 24, i: 20, e: 12, k: 4, idle: [0, 7, 11] },
  'top-2, T*k = 48, bfloat16 weights': { t: 24, h: 16, i: 12, e: 8, k: 2, idle: [5], wdtype: 'bfloat16' },
  'T = 1, top-2, H and 2I past one 64-wide gradient tile': { t: 1, h: 70, i: 33, e: 3, k: 2, idle: [1] },
};

const KEYS = ['out', 'dx', 'dw', 'dr', 'dGateUp', 'dDown'] as const;

/** bfloat16 expert weights get bfloat16 gradients: rounded to 8 bits either way, maybe to neighbouring values. */
function tolerance(c: Case, key: (typeof KEYS)[number], tol: number) {
  const rounded = c.wdtype === 'bfloat16' && (key === 'dGateUp' || key === 'dDown');
  return rounded ? { atol: 2e-2, rtol: 1e-2 } : { atol: tol, rtol: tol };
}

describe('moeExperts: fused vs composed per expert, gradients (CPU)', () => {
  it('matches central differences in x, the routing weights and the residual', async () => {
    const c: Case = { t: 3, h: 4, i: 3, e: 4, k: 2, idle: [3] };
    const inp = inputs(c, 7);
    const ids = tensor(Int32Array.from(inp.ids), { shape: [c.t, c.k] });
    const f = (x: Tensor, w: Tensor, res: Tensor) => moeExperts(x, inp.gateUp, inp.down, ids, w, { residual: res });
    await gradcheck('moeExperts (x, weights, residual)', f, [inp.x, inp.weights, inp.residual], { atol: 3e-3, rtol: 1e-2 });
  });

  for (const [name, c] of Object.entries(CASES)) {
    it(name, async () => {
      const inp = inputs(c, 11);
      const r = randomTensor([c.t, c.h]);
      const fused = await run(true, inp, c, 'cpu', r);
      const ref = await run(false, inp, c, 'cpu', r);
      for (const key of KEYS) expectClose(fused[key], ref[key], tolerance(c, key, 1e-4), `${name} ${key}`);
      expect(fused.gradDtypes).toEqual([c.wdtype ?? 'float32', c.wdtype ?? 'float32']);
      // An idle expert's weight gradient is exact zeros.
      const per = [2 * c.i * c.h, c.h * c.i];
      for (const e of c.idle) {
        [fused.dGateUp, fused.dDown].forEach((d, w) => expect(Array.from(d.slice(e * per[w], (e + 1) * per[w])).every((v) => v === 0)).toBe(true));
      }
    });
  }

  it('matches central differences in the expert weights (gateUp, down)', async () => {
    const c: Case = { t: 3, h: 3, i: 2, e: 3, k: 2, idle: [] };
    const inp = inputs(c, 5);
    const ids = tensor(Int32Array.from(inp.ids), { shape: [c.t, c.k] });
    const f = (gu: Tensor, d: Tensor) => moeExperts(inp.x, gu, d, ids, inp.weights, { residual: inp.residual });
    await gradcheck('moeExperts (gateUp, down)', f, [inp.gateUp, inp.down], { atol: 3e-3, rtol: 1e-2 });
  });

  it('only the expert weights require grad: their gradients alone', async () => {
    const c: Case = { t: 4, h: 5, i: 3, e: 3, k: 2, idle: [1] };
    const inp = inputs(c, 13);
    const ids = tensor(Int32Array.from(inp.ids), { shape: [c.t, c.k] });
    const r = randomTensor([c.t, c.h]);
    const [gu, d] = [inp.gateUp.detach().requiresGrad_(), inp.down.detach().requiresGrad_()];
    moeExperts(inp.x, gu, d, ids, inp.weights).mul(r).sum().backward();
    const all = await run(true, inp, c, 'cpu', r);
    expectClose(await gu.grad!.toArray(), all.dGateUp, { atol: 1e-6, rtol: 1e-6 }, 'dGateUp');
    expectClose(await d.grad!.toArray(), all.dDown, { atol: 1e-6, rtol: 1e-6 }, 'dDown');
    // down alone: no gateUp gradient path runs.
    const d2 = inp.down.detach().requiresGrad_();
    moeExperts(inp.x, inp.gateUp, d2, ids, inp.weights).mul(r).sum().backward();
    expectClose(await d2.grad!.toArray(), all.dDown, { atol: 1e-6, rtol: 1e-6 }, 'dDown alone');
  });
});

/** Random ids in 0..e-1 except the idle ones; a token may repeat an expert (the kernel does not care). */
function anyIds(t: number, k: number, e: number, idle: readonly number[], seed: number): number[] {
  const pool = Array.from({ length: e }, (_, i) => i).filter((i) => !idle.includes(i));
  let s = seed;
  return Array.from({ length: t * k }, () => {
    s = (s * 1103515245 + 12345) >>> 0;
    return pool[(s >>> 8) % pool.length];
  });
}

describe('expertLinear: differentiable in x and the stacked weight (the plain form)', () => {
  // x with a row per token (shared by its k slots: its gradient sums theirs) or a row per slot.
  for (const perSlot of [false, true]) {
    it(`matches central differences (x ${perSlot ? '[T*k, K]' : '[T, K]'}, an idle expert)`, async () => {
      const c: Case = { t: 5, h: 7, i: 3, e: 4, k: 2, idle: [2] };
      const ids = tensor(Int32Array.from(randomIds(c, 3)), { shape: [c.t, c.k] });
      const x = randomTensor([perSlot ? c.t * c.k : c.t, c.h]);
      const w = randomTensor([c.e, c.i, c.h], 'float32', 'normal', 0.5);
      await gradcheck('expertLinear (x, weight)', (a, b) => expertLinear(a, b, ids), [x, w], { atol: 3e-3, rtol: 1e-2 });
      for (const t of [ids, x, w]) t.dispose();
    });
  }

  it.skipIf(!gpu.available)('WebGPU gives the CPU gradients; no slot on an expert gives it zeros', async () => {
    const c: Case = { t: 9, h: 20, i: 12, e: 6, k: 3, idle: [0, 4] };
    const host = {
      ids: randomIds(c, 8),
      x: randomTensor([c.t, c.h]),
      w: randomTensor([c.e, c.i, c.h], 'float32', 'normal', 0.5),
      r: randomTensor([c.t * c.k, c.i]),
    };
    const grads = async (device: 'cpu' | 'webgpu') => {
      const on = async (t: Tensor) => (device === 'cpu' ? t.clone() : await t.to('webgpu'));
      const [x, w, r] = await Promise.all([host.x, host.w, host.r].map(on));
      x.requiresGrad_();
      w.requiresGrad_();
      const ids = tensor(Int32Array.from(host.ids), { shape: [c.t, c.k], device });
      const y = expertLinear(x, w, ids);
      y.mul(r).sum().backward();
      const out = { y: await y.toArray(), dx: await x.grad!.toArray(), dw: await w.grad!.toArray() };
      for (const t of [x, w, r, ids, y]) t.dispose();
      return out;
    };
    const [want, got] = [await grads('cpu'), await grads('webgpu')];
    for (const key of ['y', 'dx', 'dw'] as const) expectClose(got[key], want[key], { atol: 2e-4, rtol: 2e-4 }, key);
    const idle = Array.from(want.dw.slice(0, c.i * c.h));
    expect(idle.every((v) => v === 0)).toBe(true);
    expect(Array.from(want.dw).some((v) => v !== 0)).toBe(true);
  });
});

describe('expertLinear over a frozen FP8 stack: x gradient through the transposed stack', () => {
  // N and K span several 128-blocks, unequally, so a scale read untransposed would land on another block.
  const [e, n, k] = [3, 200, 300];
  const [nb, kb] = [Math.ceil(n / 128), Math.ceil(k / 128)];
  /** The stack's codes, its block scales, and the float32 stack they stand for. */
  async function stacks() {
    const codes = randomTensor([e, n, k], 'float32', 'normal', 2).to('float8_e4m3fn');
    const scale = randomTensor([e, nb, kb], 'float32', 'positive');
    const [w, sc] = [await codes.to('float32').toArray(), await scale.toArray()];
    const deq = Float32Array.from(w, (v, i) => {
      const [ee, row, col] = [Math.floor(i / (n * k)), Math.floor(i / k) % n, i % k];
      return v * sc[(ee * nb + Math.floor(row / 128)) * kb + Math.floor(col / 128)];
    });
    return { codes, scale, dequantized: tensor(deq, { shape: [e, n, k] }) };
  }
  const devices: ('cpu' | 'webgpu')[] = gpu.available ? ['cpu', 'webgpu'] : ['cpu'];
  for (const device of devices) {
    // 5 tokens x 2 slots: the per-slot GEMV; 40 x 2: the grouped GEMM.
    for (const t of [5, 40]) {
      it(`${device}, ${t * 2} slots: the dequantized stack's output and dx`, async () => {
        const host = await stacks();
        const on = async (x: Tensor) => (device === 'cpu' ? x.clone() : await x.to('webgpu'));
        const c: Case = { t, h: k, i: n, e, k: 2, idle: [] };
        const ids = tensor(Int32Array.from(randomIds(c, 11)), { shape: [t, 2], device });
        const [xHost, rHost] = [randomTensor([t, k]), randomTensor([t * 2, n])];
        const run = async (w: Tensor, scale?: Tensor) => {
          const [x, r] = [await on(xHost), await on(rHost)];
          x.requiresGrad_();
          const y = expertLinear(x, w, ids, { scale });
          y.mul(r).sum().backward();
          const out = { y: await y.toArray(), dx: await x.grad!.toArray() };
          for (const u of [x, r, y]) u.dispose();
          return out;
        };
        const got = await run(await on(host.codes), await on(host.scale));
        const want = await run(await on(host.dequantized));
        expectClose(got.y, want.y, { atol: 1e-4, rtol: 1e-4 }, 'y');
        expectClose(got.dx, want.dx, { atol: 1e-4, rtol: 1e-4 }, 'dx');
        expect(Array.from(got.dx).some((v) => v !== 0)).toBe(true);
        ids.dispose();
      });
    }
  }

  it('the FP8 stack itself gets no gradient: asking for one is an error', () => {
    const w = randomTensor([2, 4, 8]).to('float8_e4m3fn').requiresGrad_();
    const ids = tensor(Int32Array.from([0, 1]), { shape: [2, 1] });
    expect(() => expertLinear(randomTensor([2, 8]), w, ids, { scale: tensor(Float32Array.from([1, 1]), { shape: [2, 1, 1] }) })).toThrow(/frozen/);
  });
});

describe('expertWeightGrad: the grouped expert weight gradient', () => {
  interface GradCase {
    t: number;
    k: number;
    e: number;
    n: number;
    kk: number;
    idle: number[];
    /** g / x with a row per slot (else per token). */
    gSlot: boolean;
    xSlot: boolean;
    combine: boolean;
    xdtype?: 'float32' | 'bfloat16';
    /** g given as a transposed view (strided rows). */
    strided?: boolean;
  }
  const GRAD_CASES: Record<string, GradCase> = {
    'T = 1, top-1, one expert of three': { t: 1, k: 1, e: 3, n: 5, kk: 7, idle: [0, 2], gSlot: false, xSlot: false, combine: true },
    'odd N and K past a 64 tile, idle expert, per-slot g': { t: 7, k: 3, e: 5, n: 67, kk: 65, idle: [3], gSlot: true, xSlot: false, combine: true },
    'more than 64 slots an expert (several plan tiles), per-slot x, no combine': {
      t: 80,
      k: 2,
      e: 2,
      n: 9,
      kk: 6,
      idle: [],
      gSlot: false,
      xSlot: true,
      combine: false,
    },
    'bfloat16 x, strided g, repeated experts': {
      t: 12,
      k: 4,
      e: 6,
      n: 10,
      kk: 13,
      idle: [4],
      gSlot: true,
      xSlot: true,
      combine: true,
      xdtype: 'bfloat16',
      strided: true,
    },
  };

  function gradInputs(c: GradCase): Tensor[] {
    const rows = (slot: boolean) => (slot ? c.t * c.k : c.t);
    return [
      tensor(Int32Array.from(anyIds(c.t, c.k, c.e, c.idle, 3)), { shape: [c.t, c.k] }),
      c.strided ? randomTensor([c.n, rows(c.gSlot)]) : randomTensor([rows(c.gSlot), c.n]),
      randomTensor([rows(c.xSlot), c.kk]).to(c.xdtype ?? 'float32'),
      randomTensor([c.t, c.k], 'float32', 'positive'),
    ];
  }

  async function grads(c: GradCase, host: Tensor[], device: 'cpu' | 'webgpu') {
    const [ids, g0, x, combine] = await Promise.all(host.map((u) => (device === 'cpu' ? u.clone() : u.to(device))));
    const g = c.strided ? g0.transpose(0, 1) : g0;
    const [d, d2] = expertWeightGrad(
      ids,
      c.e,
      [
        { g, x },
        { g: x, x: g },
      ],
      { combine: c.combine ? combine : undefined },
    );
    expect(d.shape).toEqual([c.e, c.n, c.kk]);
    expect(d2.shape).toEqual([c.e, c.kk, c.n]);
    expect(d.dtype).toBe('float32');
    const out = [await d.toArray(), await d2.toArray()];
    for (const u of [ids, g0, x, combine, d, d2]) u.dispose();
    return out;
  }

  for (const [name, c] of Object.entries(GRAD_CASES)) {
    it(`${name}: idle experts zero${gpu.available ? ', WebGPU vs the CPU oracle' : ''}`, async () => {
      const host = gradInputs(c);
      const [d, d2] = await grads(c, host, 'cpu');
      const ids = anyIds(c.t, c.k, c.e, c.idle, 3);
      expect(d.length).toBe(c.e * c.n * c.kk);
      for (const e of c.idle) expect(Array.from(d.slice(e * c.n * c.kk, (e + 1) * c.n * c.kk)).every((v) => v === 0)).toBe(true);
      if (ids.length > 1) expect(ids.some((id, s) => ids.indexOf(id) !== s)).toBe(true);
      if (gpu.available) {
        const [gd, gd2] = await grads(c, host, 'webgpu');
        expectClose(gd, d, { atol: 1e-5, rtol: 1e-4 }, `${name} grad`);
        expectClose(gd2, d2, { atol: 1e-5, rtol: 1e-4 }, `${name} swapped grad`);
        for (const e of c.idle) expect(Array.from(gd.slice(e * c.n * c.kk, (e + 1) * c.n * c.kk)).every((v) => v === 0)).toBe(true);
      }
      for (const u of host) u.dispose();
    });
  }
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
      for (const key of KEYS) {
        expectClose(got[key], want[key], tolerance(c, key, 2e-4), `${name} ${key}`);
        expectClose(composedGpu[key], want[key], tolerance(c, key, 2e-4), `${name} composed ${key}`);
      }
    });
  }

  it('forward + backward dispatches do not grow with the number of experts', async () => {
    const count = async (e: number) => {
      const c: Case = { t: 16, h: 16, i: 8, e, k: 4, idle: [] };
      const inp = inputs(c, 9);
      const r = randomTensor([c.t, c.h]);
      await run(true, inp, c, 'webgpu', r, grads); // pipelines
      await synchronize();
      const before = gpuCounters().dispatches;
      await run(true, inp, c, 'webgpu', r, grads);
      return gpuCounters().dispatches - before;
    };
    let grads = false;
    const [few, many] = [await count(4), await count(32)];
    expect(many).toBe(few);
    // Forward 6 (two grouped GEMMs: plan, GEMM, combine; swiglu) + backward + the test's own mul, sum, seed.
    expect(many).toBeLessThan(30);
    // With the expert weights' gradients: one plan and one dispatch per stack more (and their reads to the host).
    grads = true;
    const [fewFull, manyFull] = [await count(4), await count(32)];
    expect(manyFull).toBe(fewFull);
    expect(manyFull - many).toBeLessThanOrEqual(3);
  });
});
