// Reductions composed of the one-dim reduce kernel and elementwise ops: var / std (two passes: the mean, then the
// squared deviations, so no cancellation), logsumexp (shifted by the max, as torch), any / all, and layer_norm.
import { isFloating } from '../core/dtype.js';
import { DTypeError, ShapeError } from '../core/errors.js';
import { formatShape } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { noGrad } from '../autograd/grad-mode.js';
import { abs, add, eq, log, mul, ne, sqrt, sub, where, exp, rsqrt } from './elementwise.js';
import { max, mean, reducedDims, sum, type Dims, type ReduceOptions } from './reduce.js';
import { groupNorm } from './vae-ops.js';

export interface VarOptions extends ReduceOptions {
  /** Subtracted from the count in the divisor (torch's correction; 1 is Bessel's, 0 the population variance). */
  correction?: number;
}

function floatInput(op: string, x: Tensor): void {
  if (!isFloating(x.dtype)) throw new DTypeError(`${op} needs a floating tensor, got ${x.describe()} (as torch); cast with .to('float32')`);
}

/**
 * torch.var: the mean squared deviation over dim(s) (all when undefined), divided by max(0, N - correction)
 * (correction defaults to 1). Two passes, so no cancellation: the mean, then the squared deviations from it.
 */
export function variance(x: Tensor, dim?: Dims, options: VarOptions = {}): Tensor {
  floatInput('var', x);
  const correction = options.correction ?? 1;
  const count = reducedDims(x, dim).reduce((n, d) => n * x.shape[d], 1);
  const mu = mean(x, dim, { keepdim: true });
  const dev = sub(x, mu);
  const sq = mul(dev, dev);
  const total = sum(sq, dim, { keepdim: options.keepdim });
  const r = mul(total, 1 / Math.max(0, count - correction));
  for (const t of [mu, dev, sq, total]) t.dispose();
  return r;
}

/** torch.std: sqrt(var) with the same options. */
export function std(x: Tensor, dim?: Dims, options: VarOptions = {}): Tensor {
  const v = variance(x, dim, options);
  const r = sqrt(v);
  v.dispose();
  return r;
}

/**
 * torch.logsumexp: log(sum(exp(x))) over dim(s), stable: shifted by the max (detached: the result does not depend
 * on it), a max of +-Inf replaced by 0 as torch does. Integer tensors are read as float32. Over an empty dim: -Inf.
 */
export function logsumexp(x: Tensor, dim?: Dims, options: ReduceOptions = {}): Tensor {
  if (!isFloating(x.dtype)) {
    const f = x.to('float32');
    try {
      return logsumexp(f, dim, options);
    } finally {
      f.dispose();
    }
  }
  const dims = reducedDims(x, dim);
  if (dims.some((d) => x.shape[d] === 0)) {
    const e = exp(x);
    const s = sum(e, dims, options);
    const r = log(s);
    e.dispose();
    s.dispose();
    return r;
  }
  const m = noGrad(() => {
    const raw = max(x.detach(), dims, { keepdim: true });
    const shift = where(eq(abs(raw), Infinity), 0, raw);
    raw.dispose();
    return shift;
  });
  const shifted = sub(x, m);
  const e = exp(shifted);
  const s = sum(e, dims, { keepdim: true });
  const l = log(s);
  const kept = add(l, m);
  for (const t of [shifted, e, s, l, m]) t.dispose();
  if (options.keepdim) return kept;
  const r = kept.reshape(x.shape.filter((_, i) => !dims.includes(i)));
  kept.dispose();
  return r;
}

function countNonzero(x: Tensor, dim: Dims, keepdim: boolean | undefined, zero: boolean): Tensor {
  const hit = zero ? eq(x, 0) : ne(x, 0);
  const n = sum(hit, dim, { keepdim });
  hit.dispose();
  return n;
}

/** torch.any: bool, whether any element over dim(s) is nonzero (NaN counts); false over an empty dim. */
export function any(x: Tensor, dim?: Dims, options: ReduceOptions = {}): Tensor {
  const n = countNonzero(x, dim, options.keepdim, false);
  const r = ne(n, 0);
  n.dispose();
  return r;
}

/** torch.all: bool, whether every element over dim(s) is nonzero; true over an empty dim. */
export function all(x: Tensor, dim?: Dims, options: ReduceOptions = {}): Tensor {
  const n = countNonzero(x, dim, options.keepdim, true);
  const r = eq(n, 0);
  n.dispose();
  return r;
}

/**
 * torch.nn.functional.layer_norm: x normalized over its last normalizedShape.length dims by their mean and biased
 * variance, (x - mean) / sqrt(var + eps), then times weight and plus bias (each of normalizedShape, optional).
 * Without gradients the normalization is one float32 pass (groupNorm's kernel with one group per row); with them it
 * is composed of ops, which autograd differentiates.
 */
export function layerNorm(x: Tensor, normalizedShape: readonly number[], weight?: Tensor, bias?: Tensor, eps = 1e-5): Tensor {
  floatInput('layerNorm', x);
  const k = normalizedShape.length;
  const tail = x.shape.slice(x.ndim - k);
  if (k === 0 || k > x.ndim || tail.some((s, i) => s !== normalizedShape[i]))
    throw new ShapeError(`layerNorm: normalizedShape ${formatShape(normalizedShape)} must be the last dims of x ${x.describe()}`);
  for (const [name, t] of [
    ['weight', weight],
    ['bias', bias],
  ] as const) {
    if (t && (t.ndim !== k || t.shape.some((s, i) => s !== normalizedShape[i])))
      throw new ShapeError(`layerNorm: ${name} ${t.describe()} must have shape ${formatShape(normalizedShape)}`);
  }
  if (!(eps >= 0)) throw new ShapeError(`layerNorm: eps must be >= 0, got ${eps}`);
  const dims = normalizedShape.map((_, i) => x.ndim - k + i);
  const rows = x.shape.slice(0, x.ndim - k).reduce((a, b) => a * b, 1);
  const size = tail.reduce((a, b) => a * b, 1);
  const grads = x.requiresGrad || weight?.requiresGrad || bias?.requiresGrad;
  let normed: Tensor;
  if (!grads && rows > 0 && size > 0) {
    const flat = x.reshape([rows, 1, size]);
    const n = groupNorm(flat, 1, undefined, undefined, eps);
    normed = n.reshape(x.shape);
    flat.dispose();
    n.dispose();
  } else {
    const mu = mean(x, dims, { keepdim: true });
    const dev = sub(x, mu);
    const v = mean(mul(dev, dev), dims, { keepdim: true });
    const inv = rsqrt(add(v, eps));
    normed = mul(dev, inv);
  }
  let r = normed;
  if (weight) r = mul(r, weight);
  if (bias) r = add(r, bias);
  return r;
}
