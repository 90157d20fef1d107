// Reference optimizer steps and gradient clipping: torch.optim's single-tensor formulas in float64, the state kept
// in its float32 storage and the parameter rounded once to its dtype when written back (as the GPU kernels do).
import type { StorageArray } from '../../core/codecs.js';
import { numel } from '../../core/shape.js';
import type { AdamStepHyper, GradNormType, Operand, SgdStepHyper } from '../../runtime/backend.js';
import { castCode } from '../../core/codecs.js';
import { values } from '../../runtime/cpu/cpu-backend.js';

type Handle = StorageArray;

/** Writes vals (row-major) into the contiguous view `dst` of its storage, in dst's dtype. */
function writeContiguous(dst: Operand<Handle>, vals: Float64Array): void {
  const h = dst.handle;
  const off = dst.view.offset;
  if (h instanceof Float32Array) h.set(vals, off);
  else for (let i = 0; i < vals.length; i++) h[off + i] = castCode(vals[i], dst.dtype);
}

/** torch's lerp(self, end, w) as its kernels compute it: two formulas, by |w| < 0.5. */
function lerp(self: number, end: number, w: number): number {
  return Math.abs(w) < 0.5 ? self + w * (end - self) : end - (end - self) * (1 - w);
}

export function adamStepReference(
  param: Operand<Handle>,
  grad: Operand<Handle>,
  m: Float32Array,
  v: Float32Array,
  vmax: Float32Array | undefined,
  h: AdamStepHyper,
): void {
  const x = values(param);
  const g = values(grad);
  const omb1 = 1 - h.beta1;
  const omb2 = 1 - h.beta2;
  for (let i = 0; i < x.length; i++) {
    let gi = h.maximize ? -g[i] : g[i];
    const xi = x[i] * h.decay;
    if (h.weightDecay !== 0) gi += h.weightDecay * xi;
    const m1 = lerp(h.first ? 0 : m[i], gi, omb1);
    const v1 = (h.first ? 0 : v[i]) * h.beta2 + omb2 * gi * gi;
    m[i] = m1;
    v[i] = v1;
    let vd = v1;
    if (vmax) {
      const prev = h.first ? 0 : vmax[i];
      vd = Number.isNaN(prev) || Number.isNaN(v1) ? NaN : Math.max(prev, v1);
      vmax[i] = vd;
    }
    x[i] = xi - (h.stepSize * m1) / (Math.sqrt(vd) / h.biasCorrection2Sqrt + h.eps);
  }
  writeContiguous(param, x);
}

export function sgdStepReference(param: Operand<Handle>, grad: Operand<Handle>, buf: Float32Array | undefined, h: SgdStepHyper): void {
  const x = values(param);
  const g = values(grad);
  for (let i = 0; i < x.length; i++) {
    let gi = h.maximize ? -g[i] : g[i];
    if (h.weightDecay !== 0) gi += h.weightDecay * x[i];
    if (buf) {
      const b = h.first ? gi : buf[i] * h.momentum + (1 - h.dampening) * gi;
      buf[i] = b;
      gi = h.nesterov ? gi + h.momentum * b : b;
    }
    x[i] -= h.lr * gi;
  }
  writeContiguous(param, x);
}

/** The norm over every grad's values in float64; NaN anywhere gives NaN (as torch's norms). */
export function gradNorm(grads: readonly Float64Array[], normType: GradNormType): number {
  let s = 0;
  for (const g of grads) {
    for (let i = 0; i < g.length; i++) {
      const a = Math.abs(g[i]);
      if (normType === Infinity) s = Number.isNaN(a) || Number.isNaN(s) ? NaN : Math.max(s, a);
      else s += normType === 2 ? a * a : a;
    }
  }
  return normType === 2 ? Math.sqrt(s) : s;
}

export function clipGradNormReference(grads: readonly Operand<Handle>[], maxNorm: number, normType: GradNormType): Handle {
  const vals = grads.map((g) => values(g));
  const norm = gradNorm(vals, normType);
  const c = maxNorm / (norm + 1e-6);
  const coef = Number.isNaN(c) ? c : Math.min(c, 1);
  grads.forEach((g, i) => {
    if (numel(g.view.shape) === 0) return;
    const v = vals[i];
    for (let j = 0; j < v.length; j++) v[j] *= coef;
    writeContiguous(g, v);
  });
  return Float32Array.of(norm);
}
