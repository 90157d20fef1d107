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
 * Several sequences in one call (continuous batching): `index` is int32 [3 * count], (first row, rows, state slot) per
 * sequence, their rows one after another in bcx (shortConvSegments builds it). A device tensor, so a captured batched
 * step replays with the index rewritten in place.
 */
export interface ShortConvSegments {
  readonly index: Tensor;
  readonly count: number;
}

/** The segment index of sequences with these row counts and state slots, their rows consecutive. */
export function shortConvSegmentTable(rows: readonly number[], slots: readonly number[]): number[] {
  const table: number[] = [];
  let first = 0;
  rows.forEach((r, i) => {
    table.push(first, r, slots[i]!);
    first += r;
  });
  return table;
}

/**
 * bcx float32 [S, 3H]; weight [H, L] or [H, 1, L] (conv.conv.weight, any float dtype); state float32 [L-1, H],
 * contiguous, zeros for a new sequence and updated in place; bias [H] (conv.conv.bias) when the conv has one.
 * Returns C * (conv(B * x) + bias) as float32 [S, H]. With `segments`, state is a pool [slots, L-1, H] and each
 * sequence's rows continue its slot.
 */
export function shortConv(bcx: Tensor, weight: Tensor, state: Tensor, bias?: Tensor, segments?: ShortConvSegments): Tensor {
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
    const one = segments ? state.shape.slice(1) : state.shape;
    if (one.length !== 2 || one[0] !== taps - 1 || one[1] !== h || (segments && state.ndim !== 3)) {
      const want = `${segments ? 'slots, ' : ''}${taps - 1}, ${h}`;
      throw new ShapeError(`shortConv: state must be [${want}] (the last taps - 1 rows of B * x), got ${formatShape(state.shape)}`);
    }
    if (segments) {
      const { index, count } = segments;
      if (index.dtype !== 'int32' || index.ndim !== 1 || index.numel < 3 * count || !index.isContiguous() || index.device !== bcx.device) {
        throw new ShapeError(`shortConv: segments.index must be a contiguous int32 [>= ${3 * count}] tensor on ${bcx.device}, got ${index.describe()}`);
      }
    }
    if (!state.isContiguous()) throw new ShapeError('shortConv: state is updated in place and must be contiguous');
    if (bias) {
      requireDTypes('shortConv bias', bias, ['float32', 'float16', 'bfloat16']);
      if (bias.ndim !== 1 || bias.shape[0] !== h) throw new ShapeError(`shortConv: bias must be [${h}], got ${formatShape(bias.shape)}`);
    }
    const packed = compact(bcx);
    try {
      const handle = runKernel('shortConv', backend, {
        bcx: packed.operand(),
        weight: w.operand(),
        state: state.operand(),
        bias: bias?.operand(),
        segments: segments && { index: segments.index.operand(), count: segments.count },
      });
      return wrap(backend, handle, 'float32', [bcx.shape[0], h]);
    } finally {
      packed.dispose();
    }
  } finally {
    if (w !== weight) w.dispose();
  }
}
