// Optimizer state dicts: a run saved to a safetensors file halfway (step counts, hyperparameters, m / v / vmax or
// momentum buffers, the scheduler's step) and resumed into fresh optimizers continues bit for bit as the run that
// never stopped, on the CPU backend and on WebGPU; what the file and the dict hold; loading checks.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  Adam,
  AdamW,
  cosineWithWarmup,
  disposeOptimizerState,
  loadOptimizerState,
  LrScheduler,
  SafetensorsFile,
  saveOptimizerState,
  SGD,
  ShapeError,
  tensor,
  type DeviceName,
  type Optimizer,
  type Tensor,
} from '../../src/index.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { gradTensor, makeProblem, type ParamSpec, type Problem } from './reference.js';

const gpu = await setupWebGpu();
const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-optim-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const SPECS: ParamSpec[] = [
  { shape: [23], dtype: 'float32' },
  { shape: [4, 6], dtype: 'bfloat16', transposedGrad: true },
  // No gradient before step 8: its state starts later and counts fewer steps.
  { shape: [5], dtype: 'float32', skip: (s) => s < 8 },
  // Never a gradient: null in the state dict.
  { shape: [3], dtype: 'float32', skip: () => true },
];
const STEPS = 30;
const HALF = 13;

type Make = (ps: Tensor[]) => Optimizer;

/** Runs steps [from, to) of the problem with opt (and its scheduler) on params. */
function run(problem: Problem, params: Tensor[], opt: Optimizer, sched: LrScheduler, from: number, to: number, device: DeviceName): void {
  for (let step = from; step < to; step++) {
    params.forEach((p, i) => {
      p.zeroGrad();
      const g = problem.grads[step][i];
      if (g) p.grad = gradTensor(problem.specs[i], g, device);
    });
    opt.step();
    sched.step();
  }
}

const paramsOf = (problem: Problem, values: (Float64Array | number[])[], device: DeviceName) =>
  problem.specs.map((s, i) => tensor(values[i], { shape: s.shape, dtype: s.dtype, device }).requiresGrad_());
const valuesOf = (ps: Tensor[]) => Promise.all(ps.map(async (p) => Array.from(await p.toArray())));

async function resumeMatches(device: DeviceName, make: Make, file: string): Promise<void> {
  const problem = makeProblem(SPECS, STEPS, 21);
  const schedule = cosineWithWarmup(3, STEPS, 0.1);

  const straight = paramsOf(problem, problem.init, device);
  const optA = make(straight);
  run(problem, straight, optA, new LrScheduler(optA, schedule), 0, STEPS, device);
  const want = await valuesOf(straight);

  const first = paramsOf(problem, problem.init, device);
  const optB = make(first);
  const schedB = new LrScheduler(optB, schedule);
  run(problem, first, optB, schedB, 0, HALF, device);
  await saveOptimizerState(file, optB.stateDict(), { scheduler: schedB.stateDict() });
  const halfway = await valuesOf(first);

  const resumed = paramsOf(problem, halfway, device);
  const optC = make(resumed);
  const schedC = new LrScheduler(optC, schedule);
  const loaded = await loadOptimizerState(file, { device });
  optC.loadStateDict(loaded);
  schedC.loadStateDict(loaded.scheduler!);
  disposeOptimizerState(loaded);
  expect(optC.lr).toBe(optB.lr);
  run(problem, resumed, optC, schedC, HALF, STEPS, device);
  const got = await valuesOf(resumed);
  got.forEach((g, i) => expect(g, `param ${i}`).toEqual(want[i]));
  // ...and the run moved the parameters, so matching is not trivial.
  expect(got[0]).not.toEqual(halfway[0]);

  for (const o of [optA, optB, optC]) o.dispose();
  for (const p of [...straight, ...first, ...resumed]) p.dispose();
}

const devices: DeviceName[] = gpu.available ? ['cpu', 'webgpu'] : ['cpu'];

describe('optimizer state dicts', () => {
  for (const device of devices) {
    it(`${device}: AdamW (amsgrad) saved halfway and resumed continues bit for bit`, async () => {
      await resumeMatches(device, (ps) => new AdamW(ps, { lr: 0.05, amsgrad: true, weightDecay: 0.1 }), join(dir, `adamw-${device}.safetensors`));
    });

    it(`${device}: SGD with Nesterov momentum saved halfway and resumed continues bit for bit`, async () => {
      await resumeMatches(device, (ps) => new SGD(ps, { lr: 0.05, momentum: 0.9, nesterov: true, weightDecay: 0.01 }), join(dir, `sgd-${device}.safetensors`));
    });
  }

  it('the dict and the file hold step counts, hyperparameters and the state tensors by PyTorch names', async () => {
    const ps = [tensor([1, 2, 3]).requiresGrad_(), tensor([4, 5]).requiresGrad_()];
    const opt = new Adam(ps, { lr: 0.125, betas: [0.5, 0.75], amsgrad: true });
    ps[0].grad = tensor([1, -1, 2]);
    opt.step();
    opt.step();
    const sd = opt.stateDict();
    expect(sd.optimizer).toBe('Adam');
    expect(sd.hyper).toEqual({ lr: 0.125, betas: [0.5, 0.75], eps: 1e-8, weightDecay: 0, amsgrad: true, maximize: false });
    expect(sd.state[1]).toBeNull();
    expect(sd.state[0]!.step).toBe(2);
    expect(Object.keys(sd.state[0]!.tensors).sort()).toEqual(['exp_avg', 'exp_avg_sq', 'max_exp_avg_sq']);
    // m after two steps of g: 0.5 * (0.5 g) + 0.5 g = 0.75 g.
    expect(Array.from(await sd.state[0]!.tensors.exp_avg.toArray())).toEqual([0.75, -0.75, 1.5]);
    const file = join(dir, 'adam.safetensors');
    await saveOptimizerState(file, sd);
    const f = await SafetensorsFile.open(file);
    expect(f.names.sort()).toEqual(['state.0.exp_avg', 'state.0.exp_avg_sq', 'state.0.max_exp_avg_sq']);
    expect(JSON.parse(f.metadata.steps)).toEqual([2, null]);
    expect(f.metadata.optimizer).toBe('Adam');
    await f.close();
    // In memory: a fresh optimizer continues from copies (the original's later steps do not change them).
    const copy = new Adam([tensor([1, 2, 3]).requiresGrad_(), tensor([4, 5]).requiresGrad_()]);
    copy.loadStateDict(sd);
    expect(copy.lr).toBe(0.125);
    opt.step();
    expect(Array.from(await copy.stateDict().state[0]!.tensors.exp_avg.toArray())).toEqual([0.75, -0.75, 1.5]);
  });

  it('loading checks the optimizer, the parameter count, shapes and the file format', async () => {
    const p = tensor([1, 2]).requiresGrad_();
    const adam = new Adam([p]);
    p.grad = tensor([1, 1]);
    adam.step();
    expect(() => new SGD([p]).loadStateDict(adam.stateDict())).toThrow(/state dict is of Adam/);
    expect(() => new Adam([p, tensor([1]).requiresGrad_()]).loadStateDict(adam.stateDict())).toThrow(/has 1 parameters, this optimizer 2/);
    expect(() => new Adam([tensor([1, 2, 3]).requiresGrad_()]).loadStateDict(adam.stateDict())).toThrow(ShapeError);
    expect(() => new Adam([p]).loadStateDict({ ...adam.stateDict(), hyper: { lr: -1 } })).toThrow(RangeError);
    expect(() => new Adam([p]).loadStateDict({ ...adam.stateDict(), hyper: { momentum: 0.9 } })).toThrow(/unknown hyperparameter/);
    const notState = join(dir, 'plain.safetensors');
    const { writeSafetensors, tensorSource } = await import('../../src/index.js');
    await writeSafetensors(notState, [['w', tensorSource(tensor([1]))]]);
    await expect(loadOptimizerState(notState)).rejects.toThrow(/not an optimizer state file/);
  });
});
