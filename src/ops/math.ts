// Elementwise ops composed of others (torch.clamp, the logical ops): exact compositions, so they need no kernel.
import { DTypeError } from '../core/errors.js';
import type { Tensor, TensorOrScalar } from '../core/tensor.js';
import { maximum, minimum, ne, eq, where } from './elementwise.js';

/**
 * torch.clamp: x limited to [min, max], either bound a JS number or a tensor (broadcast), either left out. NaN stays
 * NaN; where min > max the result is max, as in torch. The gradient flows where x is inside the bounds.
 */
export function clamp(x: Tensor, min?: TensorOrScalar, max?: TensorOrScalar): Tensor {
  if (min === undefined && max === undefined) throw new DTypeError(`clamp: give min, max or both (tensor ${x.describe()})`);
  const low = min === undefined ? x : maximum(x, min);
  if (max === undefined) return low;
  const r = minimum(low, max);
  if (low !== x) low.dispose();
  return r;
}

/** x != 0 as bool (a bool tensor as it is). */
const truth = (x: Tensor) => (x.dtype === 'bool' ? x : ne(x, 0));

function logical(a: Tensor, b: Tensor, combine: (ta: Tensor, tb: Tensor) => Tensor): Tensor {
  const ta = truth(a);
  const tb = truth(b);
  try {
    return combine(ta, tb);
  } finally {
    if (ta !== a) ta.dispose();
    if (tb !== b) tb.dispose();
  }
}

/** torch.logical_and: bool, true where both are nonzero (NaN counts as true); broadcasts. */
export const logicalAnd = (a: Tensor, b: Tensor) => logical(a, b, (ta, tb) => where(ta, tb, ta));
/** torch.logical_or. */
export const logicalOr = (a: Tensor, b: Tensor) => logical(a, b, (ta, tb) => where(ta, ta, tb));
/** torch.logical_xor. */
export const logicalXor = (a: Tensor, b: Tensor) => logical(a, b, (ta, tb) => ne(ta, tb));
/** torch.logical_not: bool, true where x is zero. */
export const logicalNot = (x: Tensor) => eq(x, 0);
