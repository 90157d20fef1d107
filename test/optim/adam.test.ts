// Adam and AdamW against a float64 reference of torch.optim's formulas over 100 steps of fresh random gradients,
// for each option (weight decay coupled and decoupled, amsgrad, maximize, a beta1 below 0.5 that takes torch's
// other lerp branch), on the CPU backend and on WebGPU, and WebGPU against the CPU; bf16 and f16 parameters;
// strided gradients; a parameter without a gradient untouched and stepped later on its own count; a parameter
// that is a view starting mid-word; one dispatch per parameter per step; the constructor's checks.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { Adam, AdamW, DTypeError, gpuCounters, ShapeError, synchronize, tensor, type Tensor } from '../../src/index.js';
import { expectClose, type Tolerance } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { adamRef, makeProblem, runOptimizer, runReference, type AdamRefOptions, type ParamSpec } from './reference.js';

const gpu = await setupWebGpu();

/** The values of tensor(g, shape reversed).permute(all dims reversed), in row-major order. */
function permutedValues(g: Float64Array, shape: readonly number[]): Float64Array {
  const rev = [...shape].reverse();
  const revStrides = rev.map((_, d) => rev.slice(d + 1).reduce((a, b) => a * b, 1));
  const out = new Float64Array(g.length);
  const idx = new Array<number>(shape.length).fill(0);
  for (let e = 0; e < g.length; e++) {
    // Element idx of the view reads element idx reversed of the base.
    out[e] = g[idx.reduce((off, v, d) => off + v * revStrides[shape.length - 1 - d], 0)];
    for (let d = shape.length - 1; d >= 0; d--) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

const STEPS = 100;
// Measured: at most 4e-6 apart after 100 steps (AdamW: 1 - lr * wd rounded to f32, as torch rounds it), params moving 0.2-0.3.
const F32: Tolerance = { atol: 1e-5, rtol: 1e-5 };

const SPECS: ParamSpec[] = [
  { shape: [37], dtype: 'float32' },
  { shape: [5, 7], dtype: 'float32', transposedGrad: true },
  { shape: [], dtype: 'float32' },
];

interface Case {
  name: string;
  make: (ps: Tensor[]) => Adam | AdamW;
  ref: AdamRefOptions;
}

const base = { lr: 1e-2, betas: [0.9, 0.999] as [number, number], eps: 1e-8, weightDecay: 0, amsgrad: false, maximize: false };
const CASES: Case[] = [
  { name: 'Adam', make: (ps) => new Adam(ps, { lr: 1e-2 }), ref: { ...base, decoupled: false } },
  { name: 'Adam weightDecay', make: (ps) => new Adam(ps, { lr: 1e-2, weightDecay: 0.1 }), ref: { ...base, weightDecay: 0.1, decoupled: false } },
  { name: 'Adam amsgrad', make: (ps) => new Adam(ps, { lr: 1e-2, amsgrad: true }), ref: { ...base, amsgrad: true, decoupled: false } },
  { name: 'Adam maximize', make: (ps) => new Adam(ps, { lr: 1e-2, maximize: true }), ref: { ...base, maximize: true, decoupled: false } },
  { name: 'AdamW defaults (weightDecay 1e-2)', make: (ps) => new AdamW(ps, { lr: 1e-2 }), ref: { ...base, weightDecay: 1e-2, decoupled: true } },
  {
    name: 'AdamW weightDecay 0.1 amsgrad maximize',
    make: (ps) => new AdamW(ps, { lr: 1e-2, weightDecay: 0.1, amsgrad: true, maximize: true }),
    ref: { ...base, weightDecay: 0.1, amsgrad: true, maximize: true, decoupled: true },
  },
  {
    name: 'AdamW betas [0.3, 0.9], eps 1e-3',
    make: (ps) => new AdamW(ps, { lr: 3e-2, betas: [0.3, 0.9], eps: 1e-3 }),
    ref: { ...base, lr: 3e-2, betas: [0.3, 0.9], eps: 1e-3, weightDecay: 1e-2, decoupled: true },
  },
];

describe('Adam / AdamW on the CPU backend against the float64 reference', () => {
  CASES.forEach((c, k) => {
    it(c.name, async () => {
      const problem = makeProblem(SPECS, STEPS, 100 + k);
      const want = runReference(problem, (n) => adamRef(c.ref, n));
      const got = await runOptimizer(problem, 'cpu', c.make);
      got.forEach((g, i) => expectClose(g, want[i], F32, `param ${i}`));
      // The parameters moved: a check that would pass with no update at all proves nothing.
      expect(Math.max(...got[0].map((x, j) => Math.abs(x - problem.init[0][j])))).toBeGreaterThan(0.1);
    });
  });

  it('validates hyperparameters and parameters as torch does', () => {
    const p = tensor([1, 2, 3]).requiresGrad_();
    expect(() => new Adam([p], { lr: -1 })).toThrow(RangeError);
    expect(() => new Adam([p], { betas: [1, 0.999] })).toThrow(/beta parameter at index 0/);
    expect(() => new AdamW([p], { eps: -1 })).toThrow(RangeError);
    expect(() => new AdamW([p], { weightDecay: -1 })).toThrow(RangeError);
    expect(() => new Adam([])).toThrow(/empty parameter list/);
    expect(() => new Adam([p, p])).toThrow(/twice/);
    expect(() => new Adam([tensor([1, 2], { dtype: 'int32' })])).toThrow(DTypeError);
    expect(
      () =>
        new Adam([
          tensor([
            [1, 2],
            [3, 4],
          ]).T,
        ]),
    ).toThrow(ShapeError);
    const opt = new Adam([p]);
    p.grad = tensor([1, 2]);
    expect(() => opt.step()).toThrow(ShapeError);
    p.zeroGrad();
    expect(() => (opt.lr = -1)).toThrow(RangeError);
  });
});

describe.skipIf(!gpu.available)(`Adam / AdamW on WebGPU ${gpu.skipReason}`, () => {
  CASES.forEach((c, k) => {
    it(`${c.name}: the reference, and the CPU backend`, async () => {
      const problem = makeProblem(SPECS, STEPS, 100 + k);
      const want = runReference(problem, (n) => adamRef(c.ref, n));
      const onGpu = await runOptimizer(problem, 'webgpu', c.make);
      const onCpu = await runOptimizer(problem, 'cpu', c.make);
      onGpu.forEach((g, i) => {
        expectClose(g, want[i], F32, `param ${i} vs reference`);
        expectClose(g, onCpu[i], F32, `param ${i} vs CPU`);
      });
    });
  });

  it('bfloat16 and float16 parameters (float32 state, rounded once per step)', async () => {
    const specs: ParamSpec[] = [
      { shape: [33], dtype: 'bfloat16' },
      { shape: [4, 9], dtype: 'bfloat16', transposedGrad: true },
      { shape: [21], dtype: 'float16' },
    ];
    const problem = makeProblem(specs, STEPS, 7);
    const ref = { ...base, lr: 5e-2, weightDecay: 1e-2, amsgrad: true, decoupled: true };
    const make = (ps: Tensor[]) => new AdamW(ps, { lr: 5e-2, amsgrad: true });
    const want = runReference(problem, (n) => adamRef(ref, n));
    const onGpu = await runOptimizer(problem, 'webgpu', make);
    const onCpu = await runOptimizer(problem, 'cpu', make);
    // Where f32 (GPU) and f64 (CPU, reference) land on either side of a rounding tie, a parameter is one ulp
    // apart from then on: a few ulps of slack (bf16: 2^-8 relative at 1; f16: 2^-11).
    specs.forEach((s, i) => {
      const tol: Tolerance = s.dtype === 'bfloat16' ? { atol: 2e-2, rtol: 2e-2 } : { atol: 3e-3, rtol: 3e-3 };
      expectClose(onGpu[i], onCpu[i], tol, `${s.dtype} param ${i} WebGPU vs CPU`);
      expectClose(onGpu[i], want[i], tol, `${s.dtype} param ${i} WebGPU vs reference`);
      expectClose(onCpu[i], want[i], tol, `${s.dtype} param ${i} CPU vs reference`);
      expect(Math.max(...onGpu[i].map((x, j) => Math.abs(x - problem.init[i][j])))).toBeGreaterThan(0.5);
    });
  });

  it('a parameter without a gradient is untouched and keeps no state; later it counts its own steps', async () => {
    const specs: ParamSpec[] = [
      { shape: [19], dtype: 'float32' },
      { shape: [6], dtype: 'float32', skip: (step) => step < 40 || step % 3 === 0 },
    ];
    const problem = makeProblem(specs, 60, 3);
    const ref = { ...base, weightDecay: 1e-2, decoupled: true };
    const want = runReference(problem, (n) => adamRef(ref, n));
    for (const device of ['cpu', 'webgpu'] as const) {
      const got = await runOptimizer(problem, device, (ps) => new AdamW(ps, { lr: 1e-2 }));
      got.forEach((g, i) => expectClose(g, want[i], F32, `${device} param ${i}`));
    }
    // Only the skipped steps: bit-identical, and no state.
    const w = tensor([1.5, -2.25, 3], { device: 'webgpu' }).requiresGrad_();
    const other = tensor([1, 2], { device: 'webgpu' }).requiresGrad_();
    const opt = new AdamW([w, other], { lr: 0.1, weightDecay: 0.5 });
    other.grad = tensor([1, 1], { device: 'webgpu' });
    opt.step();
    opt.step();
    expect(Array.from(await w.toArray())).toEqual([1.5, -2.25, 3]);
    expect(opt.stateDict().state[0]).toBeNull();
    expect(opt.stateDict().state[1]?.step).toBe(2);
    opt.dispose();
    [w, other].forEach((t) => (t.zeroGrad(), t.dispose()));
  });

  it('a parameter that is a view starting mid-word: only its elements change', async () => {
    for (const device of ['cpu', 'webgpu'] as const) {
      const vals = Array.from({ length: 12 }, (_, i) => i + 1);
      const whole = tensor(vals, { dtype: 'bfloat16', device });
      const p = whole.narrow(0, 3, 6).requiresGrad_();
      expect(p.isLeaf && p.offset === 3).toBe(true);
      const opt = new Adam([p], { lr: 0.25 });
      p.grad = tensor([1, -1, 2, -2, 3, -3], { dtype: 'bfloat16', device });
      opt.step();
      const got = Array.from(await whole.toArray());
      // The first Adam step moves every element by lr against its gradient's sign (m / sqrt(v) = sign(g)).
      const want = vals.map((v, i) => (i >= 3 && i < 9 ? v - 0.25 * Math.sign([1, -1, 2, -2, 3, -3][i - 3]) : v));
      expect(got, device).toEqual(want);
      opt.dispose();
      p.zeroGrad();
      p.dispose();
      whole.dispose();
    }
  });

  it('a gradient view of rank 9 (past strided_offset) and amsgrad switched on by a loaded state dict', async () => {
    const shape = [1, 2, 1, 1, 3, 1, 1, 1, 2];
    const problem = makeProblem([{ shape, dtype: 'float32' }], 6, 17);
    const results: Float32Array[] = [];
    for (const device of ['cpu', 'webgpu'] as const) {
      const p = tensor(problem.init[0], { shape, device }).requiresGrad_();
      const opt = new Adam([p], { lr: 0.1 });
      for (const [step, grads] of problem.grads.entries()) {
        p.zeroGrad();
        p.grad = tensor(grads[0]!, { shape: [...shape].reverse(), device }).permute(8, 7, 6, 5, 4, 3, 2, 1, 0);
        if (step === 3) {
          // max_exp_avg_sq starts from zero beside three steps of moments: max(0, v) = v this step.
          opt.loadStateDict({ ...opt.stateDict(), hyper: { ...opt.stateDict().hyper, amsgrad: true } });
        }
        opt.step();
      }
      expect(Object.keys(opt.stateDict().state[0]!.tensors)).toContain('max_exp_avg_sq');
      results.push(Float32Array.from(await p.toArray()));
      opt.dispose();
      p.zeroGrad();
      p.dispose();
    }
    // The reference: the same gradients in row-major order of the permuted view, the max kept from step 4.
    const want = runReference({ ...problem, grads: problem.grads.map(([g]) => [permutedValues(g!, shape)]) }, (n) =>
      adamRef({ ...base, lr: 0.1, decoupled: false, amsgrad: true, amsgradFrom: 4 }, n),
    );
    expectClose(results[0], want[0], F32, 'CPU');
    expectClose(results[1], results[0], F32, 'WebGPU vs CPU');
  });

  it('one dispatch per parameter per step, the first step included (strided gradients read in place)', async () => {
    const params = [tg.randn([64, 3], { device: 'webgpu' }), tg.randn([5], { device: 'webgpu' }), tg.randn([2, 2, 2], { device: 'webgpu' })].map((p) =>
      p.requiresGrad_(),
    );
    for (const amsgrad of [false, true]) {
      const opt = new AdamW(params, { amsgrad });
      for (let step = 0; step < 3; step++) {
        params.forEach((p, i) => {
          p.zeroGrad();
          p.grad = i === 0 ? tg.randn([3, 64], { device: 'webgpu' }).T : tg.randn(p.shape, { device: 'webgpu' });
        });
        await synchronize();
        const before = gpuCounters();
        opt.step();
        const after = gpuCounters();
        expect(after.dispatches - before.dispatches, `step ${step}, amsgrad ${amsgrad}`).toBe(params.length);
        expect((after.byKernel.adam ?? 0) - (before.byKernel.adam ?? 0)).toBe(params.length);
        expect(after.reads).toBe(before.reads);
      }
      opt.dispose();
    }
    params.forEach((p) => (p.zeroGrad(), p.dispose()));
  });
});
