// Float64 references of torch.optim's update rules (adam.py / adamw.py / sgd.py, single-tensor path), written from
// the formulas (m = b1 m + (1 - b1) g, ...) rather than from the kernels' operation order, and the harness that
// runs an optimizer for many steps on fresh random gradients on one device.
import { decodeOne, encodeOne } from '../../src/core/codecs.js';
import { tensor, type DeviceName, type DType, type Tensor } from '../../src/index.js';
import type { Optimizer } from '../../src/optim/optimizer.js';
import { Generator } from '../../src/index.js';

/** x rounded to dtype's nearest value (what the parameter's storage holds). */
export function roundTo(dtype: DType, x: number): number {
  return dtype === 'float32' ? Math.fround(x) : decodeOne(dtype, encodeOne(dtype, x));
}

export interface AdamRefOptions {
  lr: number;
  betas: [number, number];
  eps: number;
  weightDecay: number;
  amsgrad: boolean;
  maximize: boolean;
  /** AdamW. */
  decoupled: boolean;
  /** The step (1-based) from which amsgrad keeps its running max, starting from zero (default 1). */
  amsgradFrom?: number;
}

export interface SgdRefOptions {
  lr: number;
  momentum: number;
  dampening: number;
  weightDecay: number;
  nesterov: boolean;
  maximize: boolean;
}

/** One parameter's update rule: step(p, g) updates p (float64) in place. */
export type RefRule = { step(p: Float64Array, g: Float64Array): void };

export function adamRef(o: AdamRefOptions, n: number): RefRule {
  const m = new Float64Array(n);
  const v = new Float64Array(n);
  const vmax = new Float64Array(n);
  let t = 0;
  const [b1, b2] = o.betas;
  return {
    step(p, grad) {
      t++;
      const bc1 = 1 - b1 ** t;
      const bc2 = 1 - b2 ** t;
      for (let i = 0; i < n; i++) {
        let g = o.maximize ? -grad[i] : grad[i];
        if (o.decoupled) p[i] -= o.lr * o.weightDecay * p[i];
        else g += o.weightDecay * p[i];
        m[i] = b1 * m[i] + (1 - b1) * g;
        v[i] = b2 * v[i] + (1 - b2) * g * g;
        const amsgrad = o.amsgrad && t >= (o.amsgradFrom ?? 1);
        if (amsgrad) vmax[i] = Math.max(vmax[i], v[i]);
        const vd = amsgrad ? vmax[i] : v[i];
        p[i] -= ((o.lr / bc1) * m[i]) / (Math.sqrt(vd) / Math.sqrt(bc2) + o.eps);
      }
    },
  };
}

export function sgdRef(o: SgdRefOptions, n: number): RefRule {
  let buf: Float64Array | undefined;
  return {
    step(p, grad) {
      const g = new Float64Array(n);
      for (let i = 0; i < n; i++) g[i] = (o.maximize ? -grad[i] : grad[i]) + o.weightDecay * p[i];
      if (o.momentum !== 0) {
        if (!buf) buf = Float64Array.from(g);
        else for (let i = 0; i < n; i++) buf[i] = o.momentum * buf[i] + (1 - o.dampening) * g[i];
        for (let i = 0; i < n; i++) g[i] = o.nesterov ? g[i] + o.momentum * buf[i] : buf[i];
      }
      for (let i = 0; i < n; i++) p[i] -= o.lr * g[i];
    },
  };
}

export interface ParamSpec {
  readonly shape: readonly number[];
  readonly dtype: DType;
  /** Steps (0-based) on which this parameter gets no gradient. */
  readonly skip?: (step: number) => boolean;
  /** 2-D only: the gradient arrives as the transpose of a contiguous [cols, rows] tensor (a strided view). */
  readonly transposedGrad?: boolean;
}

/** Initial values and every step's gradients (undefined on skipped steps), already rounded to each dtype. */
export interface Problem {
  readonly specs: readonly ParamSpec[];
  readonly init: Float64Array[];
  readonly grads: (Float64Array | undefined)[][];
}

const numelOf = (s: readonly number[]) => s.reduce((a, b) => a * b, 1);

/** Seeded normal values (never exactly zero), rounded to dtype. */
function normals(gen: Generator, n: number, dtype: DType, scale: number): Float64Array {
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = roundTo(dtype, gen.normal() * scale || 0.125);
  return out;
}

export function makeProblem(specs: readonly ParamSpec[], steps: number, seed: number, gradScale = 1): Problem {
  const gen = new Generator(seed);
  const init = specs.map((s) => normals(gen, numelOf(s.shape), s.dtype, 1));
  const grads = Array.from({ length: steps }, (_, step) => specs.map((s) => (s.skip?.(step) ? undefined : normals(gen, numelOf(s.shape), s.dtype, gradScale))));
  return { specs, init, grads };
}

/** The reference trajectory: each parameter's final values, rounded to its dtype after every step. */
export function runReference(problem: Problem, rule: (n: number) => RefRule): Float64Array[] {
  const ps = problem.init.map((x) => Float64Array.from(x));
  const rules = problem.specs.map((s) => rule(numelOf(s.shape)));
  for (const grads of problem.grads) {
    grads.forEach((g, i) => {
      if (!g) return;
      rules[i].step(ps[i], g);
      const dtype = problem.specs[i].dtype;
      for (let j = 0; j < ps[i].length; j++) ps[i][j] = roundTo(dtype, ps[i][j]);
    });
  }
  return ps;
}

/** The gradient tensor of parameter spec s on device (a strided view when transposedGrad). */
export function gradTensor(s: ParamSpec, g: Float64Array, device: DeviceName): Tensor {
  if (!s.transposedGrad) return tensor(g, { shape: s.shape, dtype: s.dtype, device });
  const [r, c] = s.shape;
  const t = new Float64Array(g.length);
  for (let i = 0; i < r; i++) for (let j = 0; j < c; j++) t[j * r + i] = g[i * c + j];
  const base = tensor(t, { shape: [c, r], dtype: s.dtype, device });
  const view = base.T;
  base.dispose();
  return view;
}

/** Runs the optimizer made by `make` over the problem on device; returns the parameters' final values. */
export async function runOptimizer(problem: Problem, device: DeviceName, make: (params: Tensor[]) => Optimizer): Promise<Float32Array[]> {
  const params = problem.specs.map((s, i) => tensor(problem.init[i], { shape: s.shape, dtype: s.dtype, device }).requiresGrad_());
  const opt = make(params);
  try {
    for (const grads of problem.grads) {
      params.forEach((p, i) => {
        p.zeroGrad();
        const g = grads[i];
        if (g) p.grad = gradTensor(problem.specs[i], g, device);
      });
      opt.step();
    }
    return await Promise.all(params.map(async (p) => Float32Array.from(await p.toArray())));
  } finally {
    opt.dispose();
    for (const p of params) {
      p.zeroGrad();
      p.dispose();
    }
  }
}
