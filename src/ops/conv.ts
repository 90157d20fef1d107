// Convolutions with torch semantics (F.conv2d / F.conv3d) whose padding costs nothing: the kernel reads positions
// outside the input as zeros by bounds checks, so no padded copy and no extra dispatch exist. Asymmetric padding
// ([before, after] per dim) covers causal temporal convolutions (all of kt - 1 in front, none behind).
import type { ConvGeometry } from '../backends/backend.js';
import { ShapeError } from '../core/errors.js';
import { formatShape, type View } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { commonBackend, requireDTypes, wrap } from './util.js';

const FLOAT_DTYPES = ['float32', 'float16', 'bfloat16'] as const;

/**
 * Zero padding of the spatial dims: one number for all of them, one per dim (symmetric, as torch), a [before, after]
 * pair per dim (asymmetric: [[kt - 1, 0], [1, 1], [1, 1]] is a causal 3x3x3 convolution), or torch's 'valid'
 * (none) and 'same' (output size = input size; stride 1 only; an odd total puts the extra zero after).
 */
export type ConvPadding = number | readonly (number | readonly [number, number])[] | 'valid' | 'same';

export interface ConvOptions {
  /** Per spatial dim or one for all; default 1. */
  stride?: number | readonly number[];
  /** Default 0. */
  padding?: ConvPadding;
  /** Spacing of the kernel taps; default 1. */
  dilation?: number | readonly number[];
  /** Input and output channels split into this many independent groups (C for depthwise); default 1. */
  groups?: number;
  /**
   * conv3d only: the P frames just before x ([N, C, P, H, W], x's N, C, H, W; any float dtype; views read in place),
   * standing in for the last P zeros of the temporal padding before x (which must be >= P). The convolution sees
   * cat(zeros(padBefore - P), previous, x, zeros(padAfter)) along T, so the output shape is unchanged: a causal
   * conv's frame cache (diffusers' WanCausalConv3d cache_x) without the cat copy. P = 0 is no previous.
   */
  previous?: Tensor;
}

/**
 * torch F.conv2d: x [N, C, H, W], weight [O, C / groups, kh, kw], bias [O]. Float dtypes (weight and bias may
 * differ from x, e.g. bfloat16 weights with float32 activations); accumulates in float32; result in x's dtype. One
 * dispatch on WebGPU, padding included.
 */
export function conv2d(x: Tensor, weight: Tensor, bias?: Tensor, options: ConvOptions = {}): Tensor {
  return convNd('conv2d', 2, x, weight, bias, options);
}

/** torch F.conv3d: x [N, C, T, H, W], weight [O, C / groups, kt, kh, kw], bias [O]; as conv2d otherwise. */
export function conv3d(x: Tensor, weight: Tensor, bias?: Tensor, options: ConvOptions = {}): Tensor {
  return convNd('conv3d', 3, x, weight, bias, options);
}

function perDim(op: string, what: string, v: number | readonly number[] | undefined, dims: number, fallback: number, min: number): number[] {
  const out = v === undefined ? new Array<number>(dims).fill(fallback) : typeof v === 'number' ? new Array<number>(dims).fill(v) : [...v];
  if (out.length !== dims || !out.every((s) => Number.isInteger(s) && s >= min)) {
    throw new ShapeError(`${op}: ${what} must be an integer >= ${min} or ${dims} of them, got ${JSON.stringify(v)}`);
  }
  return out;
}

/** [before, after] zeros per spatial dim. */
function paddingPairs(op: string, padding: ConvPadding | undefined, dims: number, kernel: readonly number[], dilation: readonly number[], stride: readonly number[]): [number, number][] {
  if (padding === 'valid' || padding === undefined) return kernel.map(() => [0, 0]);
  if (padding === 'same') {
    if (stride.some((s) => s !== 1)) throw new ShapeError(`${op}: padding 'same' needs stride 1, got [${stride.join(', ')}]`);
    return kernel.map((k, d) => {
      const total = dilation[d] * (k - 1);
      return [Math.floor(total / 2), total - Math.floor(total / 2)];
    });
  }
  const list = typeof padding === 'number' ? new Array<number>(dims).fill(padding) : padding;
  if (!Array.isArray(list) || list.length !== dims) throw new ShapeError(`${op}: padding must be a number, ${dims} numbers or ${dims} [before, after] pairs, got ${JSON.stringify(padding)}`);
  return list.map((p: number | readonly [number, number]) => {
    const pair = typeof p === 'number' ? [p, p] : Array.isArray(p) && p.length === 2 ? [p[0], p[1]] : undefined;
    if (!pair || !pair.every((v) => Number.isInteger(v) && v >= 0)) {
      throw new ShapeError(`${op}: padding entries must be integers >= 0 or [before, after] pairs of them, got ${JSON.stringify(padding)}`);
    }
    return pair as [number, number];
  });
}

/** A 4-D [N, C, H, W] view as 5-D [N, C, 1, H, W] (no copy). */
function as5d(v: View): View {
  return v.shape.length === 5 ? v : { shape: [v.shape[0], v.shape[1], 1, v.shape[2], v.shape[3]], strides: [v.strides[0], v.strides[1], 0, v.strides[2], v.strides[3]], offset: v.offset };
}

function convNd(op: string, dims: 2 | 3, x: Tensor, weight: Tensor, bias: Tensor | undefined, options: ConvOptions): Tensor {
  const prev = options.previous;
  if (prev && dims === 2) throw new ShapeError(`${op}: previous (cached frames before x) needs a time dim; use conv3d, got previous ${prev.describe()}`);
  const backend = commonBackend(op, x, weight, ...(bias ? [bias] : []), ...(prev ? [prev] : []));
  requireDTypes(op, x, FLOAT_DTYPES);
  requireDTypes(op, weight, FLOAT_DTYPES);
  if (bias) requireDTypes(op, bias, FLOAT_DTYPES);
  if (prev) requireDTypes(op, prev, FLOAT_DTYPES);
  const layout = dims === 2 ? '[N, C, H, W]' : '[N, C, T, H, W]';
  if (x.ndim !== dims + 2) throw new ShapeError(`${op}: x must be ${layout}, got ${x.describe()}`);
  if (weight.ndim !== dims + 2) throw new ShapeError(`${op}: weight must be [O, C / groups, ${dims === 2 ? 'kh, kw' : 'kt, kh, kw'}], got ${weight.describe()}`);
  const groups = options.groups ?? 1;
  if (!Number.isInteger(groups) || groups < 1) throw new ShapeError(`${op}: groups must be an integer >= 1, got ${groups}`);
  const [n, c] = x.shape;
  const [o, cg] = weight.shape;
  if (c % groups !== 0 || o % groups !== 0) throw new ShapeError(`${op}: ${c} input and ${o} output channels must both be multiples of groups ${groups}`);
  if (cg * groups !== c) {
    throw new ShapeError(`${op}: weight ${formatShape(weight.shape)} takes ${cg} channels per group, but x ${formatShape(x.shape)} has ${c} channels in ${groups} group(s) (${c / groups} each)`);
  }
  if (bias && (bias.ndim !== 1 || bias.shape[0] !== o)) throw new ShapeError(`${op}: bias must be [${o}], got ${bias.describe()}`);
  const kernel = weight.shape.slice(2);
  const stride = perDim(op, 'stride', options.stride, dims, 1, 1);
  const dilation = perDim(op, 'dilation', options.dilation, dims, 1, 1);
  const pads = paddingPairs(op, options.padding, dims, kernel, dilation, stride);
  const spatial = x.shape.slice(2).map((size, d) => {
    const span = dilation[d] * (kernel[d] - 1) + 1;
    const outSize = Math.floor((size + pads[d][0] + pads[d][1] - span) / stride[d]) + 1;
    if (outSize < 1) {
      throw new ShapeError(`${op}: spatial dim ${d} of x ${formatShape(x.shape)} padded by [${pads[d].join(', ')}] is ${size + pads[d][0] + pads[d][1]}, smaller than the dilated kernel span ${span}`);
    }
    return outSize;
  });
  if (prev) {
    const [pn, pc, np, ph, pw] = prev.shape;
    if (prev.ndim !== 5 || pn !== n || pc !== c || ph !== x.shape[3] || pw !== x.shape[4]) {
      throw new ShapeError(`${op}: previous must be [${n}, ${c}, P, ${x.shape[3]}, ${x.shape[4]}] (x's N, C, H, W), got ${prev.describe()} for x ${formatShape(x.shape)}`);
    }
    if (np > pads[0][0]) {
      throw new ShapeError(`${op}: previous ${formatShape(prev.shape)} has ${np} frames but the temporal padding before x is only ${pads[0][0]}; it replaces that many zeros at most`);
    }
  }
  const outShape = [n, o, ...spatial];
  const lift = (a: number[], t: number) => (dims === 2 ? [t, ...a] : a);
  const geometry: ConvGeometry = {
    stride: lift(stride, 1),
    dilation: lift(dilation, 1),
    padBefore: lift(pads.map((p) => p[0]), 0),
    groups,
  };
  const handle = backend.conv(
    { ...x.operand(), view: as5d(x.layout) },
    { ...weight.operand(), view: as5d(weight.layout) },
    bias?.operand(),
    geometry,
    dims === 2 ? [n, o, 1, spatial[0], spatial[1]] : outShape,
    prev && prev.shape[2] > 0 ? prev.operand() : undefined,
  );
  return wrap(backend, handle, x.dtype, outShape);
}
