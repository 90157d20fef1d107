// SGD against a float64 reference of torch.optim.sgd's formulas over 100 steps of fresh random gradients, for
// each option (momentum, dampening, Nesterov, weight decay, maximize), on the CPU backend and on WebGPU, and WebGPU
// against the CPU; bf16 parameters; strided gradients; a parameter without a gradient untouched; one dispatch
// per parameter per step; the constructor's checks.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { gpuCounters, SGD, synchronize, tensor, type Tensor } from '../../src/index.js';
import { expectClose, type Tolerance } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { makeProblem, runOptimizer, runReference, sgdRef, type ParamSpec, type SgdRefOptions } from './reference.js';

const gpu = await setupWebGpu();

const STEPS = 100;
// Measured: at most 7e-7 apart after 100 steps, params moving about 2.
const F32: Tolerance = { atol: 1e-5, rtol: 1e-5 };

const SPECS: ParamSpec[] = [
  { shape: [41], dtype: 'float32' },
  { shape: [6, 5], dtype: 'float32', transposedGrad: true },
  { shape: [], dtype: 'float32' },
];

const base: SgdRefOptions = { lr: 1e-2, momentum: 0, dampening: 0, weightDecay: 0, nesterov: false, maximize: false };
const CASES: { name: string; o: SgdRefOptions }[] = [
  { name: 'plain', o: base },
  { name: 'momentum 0.9', o: { ...base, momentum: 0.9 } },
  { name: 'momentum 0.8, dampening 0.3', o: { ...base, momentum: 0.8, dampening: 0.3 } },
  { name: 'nesterov', o: { ...base, momentum: 0.9, nesterov: true } },
  { name: 'weightDecay 0.1 with momentum', o: { ...base, momentum: 0.5, weightDecay: 0.1 } },
  { name: 'maximize with nesterov and weight decay', o: { ...base, momentum: 0.7, nesterov: true, weightDecay: 0.05, maximize: true } },
];
const make = (o: SgdRefOptions) => (ps: Tensor[]) => new SGD(ps, o);

describe('SGD on the CPU backend against the float64 reference', () => {
  CASES.forEach((c, k) => {
    it(c.name, async () => {
      const problem = makeProblem(SPECS, STEPS, 200 + k);
      const want = runReference(problem, (n) => sgdRef(c.o, n));
      const got = await runOptimizer(problem, 'cpu', make(c.o));
      got.forEach((g, i) => expectClose(g, want[i], F32, `param ${i}`));
      expect(Math.max(...got[0].map((x, j) => Math.abs(x - problem.init[0][j])))).toBeGreaterThan(0.1);
    });
  });

  it('validates hyperparameters as torch does', () => {
    const p = tensor([1, 2, 3]).requiresGrad_();
    expect(() => new SGD([p], { lr: -0.1 })).toThrow(RangeError);
    expect(() => new SGD([p], { momentum: -0.5 })).toThrow(RangeError);
    expect(() => new SGD([p], { weightDecay: -1 })).toThrow(RangeError);
    expect(() => new SGD([p], { nesterov: true })).toThrow(/Nesterov/);
    expect(() => new SGD([p], { nesterov: true, momentum: 0.9, dampening: 0.1 })).toThrow(/Nesterov/);
    const q = tensor([1, 2]).requiresGrad_();
    const nonLeaf = q.mul(2);
    expect(() => new SGD([nonLeaf])).toThrow(/not a leaf/);
  });

  it('without momentum keeps no buffer; with it, momentum_buffer is the first gradient after one step', async () => {
    const p = tensor([1, 2, 3]).requiresGrad_();
    const plain = new SGD([p], { lr: 0.5 });
    p.grad = tensor([1, 1, 1]);
    plain.step();
    expect(Object.keys(plain.stateDict().state[0]!.tensors)).toEqual([]);
    const withMomentum = new SGD([p], { lr: 0.5, momentum: 0.9, weightDecay: 0.5 });
    withMomentum.step();
    // buf = g + wd * p with p = [0.5, 1.5, 2.5] (torch clones the decayed gradient on the first step).
    expect(Array.from(await withMomentum.stateDict().state[0]!.tensors.momentum_buffer.toArray())).toEqual([1.25, 1.75, 2.25]);
    expect(Array.from(await p.toArray())).toEqual([0.5 - 0.625, 1.5 - 0.875, 2.5 - 1.125]);
  });
});

describe.skipIf(!gpu.available)(`SGD on WebGPU ${gpu.skipReason}`, () => {
  CASES.forEach((c, k) => {
    it(`${c.name}: the reference, and the CPU backend`, async () => {
      const problem = makeProblem(SPECS, STEPS, 200 + k);
      const want = runReference(problem, (n) => sgdRef(c.o, n));
      const onGpu = await runOptimizer(problem, 'webgpu', make(c.o));
      const onCpu = await runOptimizer(problem, 'cpu', make(c.o));
      onGpu.forEach((g, i) => {
        expectClose(g, want[i], F32, `param ${i} vs reference`);
        expectClose(g, onCpu[i], F32, `param ${i} vs CPU`);
      });
    });
  });

  it('bfloat16 parameters, a parameter without a gradient untouched', async () => {
    const specs: ParamSpec[] = [
      { shape: [35], dtype: 'bfloat16' },
      { shape: [3, 7], dtype: 'bfloat16', transposedGrad: true },
      { shape: [9], dtype: 'bfloat16', skip: () => true },
    ];
    const problem = makeProblem(specs, STEPS, 11);
    const o = { ...base, lr: 3e-2, momentum: 0.9, nesterov: true, weightDecay: 0.01 };
    const want = runReference(problem, (n) => sgdRef(o, n));
    const onGpu = await runOptimizer(problem, 'webgpu', make(o));
    const onCpu = await runOptimizer(problem, 'cpu', make(o));
    const tol: Tolerance = { atol: 2e-2, rtol: 2e-2 };
    specs.forEach((_s, i) => {
      expectClose(onGpu[i], onCpu[i], tol, `param ${i} WebGPU vs CPU`);
      expectClose(onGpu[i], want[i], tol, `param ${i} WebGPU vs reference`);
    });
    expectClose(onGpu[2], problem.init[2], { atol: 0, rtol: 0 }, 'the parameter without gradients');
    expect(Math.max(...onGpu[0].map((x, j) => Math.abs(x - problem.init[0][j])))).toBeGreaterThan(0.5);
  });

  it("a gradient in the parameter's own storage, and a bad gradient that leaves the whole step undone", async () => {
    for (const device of ['cpu', 'webgpu'] as const) {
      const p = tensor([2, -4, 6], { device }).requiresGrad_();
      const q = tensor([1, 1], { device }).requiresGrad_();
      const opt = new SGD([p, q], { lr: 0.25 });
      p.grad = p.detach();
      q.grad = tensor([1, 1, 1], { device });
      expect(() => opt.step()).toThrow(/parameter 1 is \[2\] but its gradient \[3\]/);
      expect(Array.from(await p.toArray()), device).toEqual([2, -4, 6]);
      q.zeroGrad();
      opt.step();
      expect(Array.from(await p.toArray()), device).toEqual([1.5, -3, 4.5]);
      opt.dispose();
      [p, q].forEach((t) => (t.zeroGrad(), t.dispose()));
    }
  });

  it('one dispatch per parameter per step, with and without momentum', async () => {
    const params = [tg.randn([10, 4], { device: 'webgpu' }), tg.randn([7], { device: 'webgpu' })].map((p) => p.requiresGrad_());
    for (const momentum of [0, 0.9]) {
      const opt = new SGD(params, { momentum, lr: 0.1 });
      for (let step = 0; step < 3; step++) {
        params.forEach((p, i) => {
          p.zeroGrad();
          p.grad = i === 0 ? tg.randn([4, 10], { device: 'webgpu' }).T : tg.randn(p.shape, { device: 'webgpu' });
        });
        await synchronize();
        const before = gpuCounters();
        opt.step();
        const after = gpuCounters();
        expect(after.dispatches - before.dispatches, `momentum ${momentum}, step ${step}`).toBe(params.length);
        expect((after.byKernel.sgd ?? 0) - (before.byKernel.sgd ?? 0)).toBe(params.length);
      }
      opt.dispose();
    }
    params.forEach((p) => (p.zeroGrad(), p.dispose()));
  });
});
