// In-place ops (torch's add_, mul_, fill_, copy_, ...): the result is computed out of place, then written into the
// tensor's own storage through its view (strides and offsets respected), which bumps the storage's version so a
// backward that saved the old values refuses to run. As in torch: the result dtype must be castable to the tensor's
// (no kind goes down: a float result into an int tensor is refused), the other operand broadcasts to the tensor's
// shape but never the tensor to a larger one, and a leaf that requires grad cannot be written while grad is on.
import { canCast, type DType } from '../core/dtype.js';
import { DTypeError, InPlaceError, ShapeError } from '../core/errors.js';
import { formatShape, sameShape } from '../core/shape.js';
import type { Tensor, TensorOrScalar } from '../core/tensor.js';
import { isGradEnabled } from '../autograd/grad-mode.js';
import { add, div, maximum, minimum, mul, pow, sub, type DivOptions, type AlphaOptions } from './elementwise.js';
import { cast } from './convert.js';
import { copyInto, expand } from './shape-ops.js';
import { full } from './creation.js';

function refuseLeaf(op: string, t: Tensor): void {
  if (isGradEnabled() && t.requiresGrad && t.isLeaf)
    throw new InPlaceError(
      `${op}: ${t.describe()} is a leaf that requires grad; an in-place write would lose its gradient (torch refuses it too). Use noGrad() or an out-of-place op`,
    );
}

/**
 * Writes `result` (made from t) into t and disposes it. Under grad, t takes over result's history (torch's rebase);
 * t must then own its whole storage (in-place writes into views of a graph need torch's CopySlices, not done here).
 */
function commit(op: string, t: Tensor, result: Tensor): Tensor {
  try {
    if (!canCast(result.dtype, t.dtype))
      throw new DTypeError(`${op}: result type ${result.dtype} can't be cast to the desired output type ${t.dtype} (tensor ${t.describe()})`);
    if (!sameShape(result.shape, t.shape))
      throw new ShapeError(`${op}: output with shape ${formatShape(t.shape)} doesn't match the broadcast shape ${formatShape(result.shape)}`);
    const tracked = isGradEnabled() && result.requiresGrad;
    if (tracked && (t.offset !== 0 || t.numel !== t.storage.length || !t.isContiguous()))
      throw new InPlaceError(`${op}: an in-place write into a view (${t.describe()}) of a tensor in the autograd graph is not supported; clone() first`);
    copyInto(t, result);
    if (tracked && result.gradFn) t.setGradFn(result.gradFn);
    return t;
  } finally {
    result.dispose();
  }
}

/** Writes op(t, other) into t. */
function binaryInPlace(op: string, t: Tensor, compute: () => Tensor): Tensor {
  refuseLeaf(op, t);
  return commit(op, t, compute());
}

export const add_ = (t: Tensor, other: TensorOrScalar, options?: AlphaOptions) => binaryInPlace('add_', t, () => add(t, other, options));
export const sub_ = (t: Tensor, other: TensorOrScalar, options?: AlphaOptions) => binaryInPlace('sub_', t, () => sub(t, other, options));
export const mul_ = (t: Tensor, other: TensorOrScalar) => binaryInPlace('mul_', t, () => mul(t, other));
export const div_ = (t: Tensor, other: TensorOrScalar, options?: DivOptions) => binaryInPlace('div_', t, () => div(t, other, options));
export const pow_ = (t: Tensor, exponent: TensorOrScalar) => binaryInPlace('pow_', t, () => pow(t, exponent));
export const maximum_ = (t: Tensor, other: TensorOrScalar) => binaryInPlace('maximum_', t, () => maximum(t, other));
export const minimum_ = (t: Tensor, other: TensorOrScalar) => binaryInPlace('minimum_', t, () => minimum(t, other));

/** t clamped into [min, max] in place (torch.clamp_): either bound may be omitted; NaN stays NaN. */
export function clamp_(t: Tensor, min?: TensorOrScalar, max?: TensorOrScalar): Tensor {
  if (min === undefined && max === undefined) throw new DTypeError('clamp_: give at least one of min and max');
  return binaryInPlace('clamp_', t, () => {
    const low = min === undefined ? undefined : maximum(t, min);
    if (max === undefined) return low!;
    const out = minimum(low ?? t, max);
    low?.dispose();
    return out;
  });
}

/** Every element of t set to value (torch.fill_), through t's view. */
export function fill_(t: Tensor, value: number): Tensor {
  refuseLeaf('fill_', t);
  if (isGradEnabled() && t.requiresGrad) throw new InPlaceError(`fill_: ${t.describe()} is in the autograd graph; detach() it first`);
  if (t.numel === 0) return t;
  const filled = full(t.shape, value, { dtype: t.dtype, device: t.device });
  try {
    copyInto(t, filled);
  } finally {
    filled.dispose();
  }
  return t;
}

/** fill_(t, 0) (torch.zero_). */
export const zero_ = (t: Tensor) => fill_(t, 0);

/**
 * src written into t (torch.Tensor.copy_): src broadcasts to t's shape and converts to t's dtype (any dtype, as
 * copy_ allows); gradients flow back to src.
 */
export function copy_(t: Tensor, src: Tensor): Tensor {
  refuseLeaf('copy_', t);
  if (!sameShape(src.shape, t.shape)) {
    const wide = expand(src, t.shape as number[]);
    try {
      return commit('copy_', t, wide.dtype === t.dtype ? wide.contiguous() : cast(wide, t.dtype as DType));
    } finally {
      wide.dispose();
    }
  }
  return commit('copy_', t, src.dtype === t.dtype ? src.clone() : cast(src, t.dtype));
}
