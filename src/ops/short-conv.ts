// LFM2's gated short convolution in one kernel: from in_proj's output [S, 3H] (B | C | x), Bx = B * x, a depthwise
// causal conv of Bx over time (L taps, the last one on the current token) continued from a per-layer state of the
// previous L-1 Bx rows, then C * conv. The state is read and rewritten by the same dispatch, so a decode step's
// conv needs no roll, concatenation or copy, and a captured step replays it as is.
import { runKernel } from '../kernels/registry.js';
import { ShapeError } from '../core/errors.js';
import { formatShape } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { compact, reshape } from './shape-ops.js';
import { commonBackend, requireDTypes, wrap } from './util.js';

/** Taps the kernels take (LFM2 uses 3). */
export const SHORT_CONV_MAX_TAPS = 9;

/**
 * bcx float32 [S, 3H]; weight [H, L] or [H, 1, L] (conv.conv.weight, any float dtype); state float32 [L-1, H],
 * contiguous, zeros for a new sequence and updated in place; bias [H] (conv.conv.bias) when the conv has one.
 * Returns C * (conv(B * x) + bias) as float32 [S, H].
 */
export function shortConv(bcx: Tensor, weight: Tensor, state: Tensor, bias?: Tensor): Tensor {
  const backend = commonBackend('shortConv', bcx, weight, state, ...(bias ? [bias] : []));
  requireDTypes('shortConv', bcx, ['float32']);
  requireDTypes('shortConv', weight, ['float32', 'float16', 'bfloat16']);
  requireDTypes('shortConv state', state, ['float32']);
  const w = weight.ndim === 3 && weight.shape[1] === 1 ? reshape(weight, [weight.shape[0], weight.shape[2]]) : weight;
  try {
    if (w.ndim !== 2) throw new ShapeError(`shortConv: weight must be [H, L] or [H, 1, L], got ${formatShape(weight.shape)}`);
    const [h, taps] = w.shape;
    if (taps < 1 || taps > SHORT_CONV_MAX_TAPS) throw new RangeError(`shortConv: the conv must have 1..${SHORT_CONV_MAX_TAPS} taps, got ${taps}`);
    if (bcx.ndim !== 2 || bcx.shape[1] !== 3 * h)
      throw new ShapeError(`shortConv: bcx must be [S, ${3 * h}] (B, C, x of ${h} channels), got ${formatShape(bcx.shape)}`);
    if (state.ndim !== 2 || state.shape[0] !== taps - 1 || state.shape[1] !== h) {
      throw new ShapeError(`shortConv: state must be [${taps - 1}, ${h}] (the last taps - 1 rows of B * x), got ${formatShape(state.shape)}`);
    }
    if (!state.isContiguous()) throw new ShapeError('shortConv: state is updated in place and must be contiguous');
    if (bias) {
      requireDTypes('shortConv bias', bias, ['float32', 'float16', 'bfloat16']);
      if (bias.ndim !== 1 || bias.shape[0] !== h) throw new ShapeError(`shortConv: bias must be [${h}], got ${formatShape(bias.shape)}`);
    }
    const packed = compact(bcx);
    try {
      const handle = runKernel('shortConv', backend, { bcx: packed.operand(), weight: w.operand(), state: state.operand(), bias: bias?.operand() });
      return wrap(backend, handle, 'float32', [bcx.shape[0], h]);
    } finally {
      packed.dispose();
    }
  } finally {
    if (w !== weight) w.dispose();
  }
}
