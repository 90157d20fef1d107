// Convolutions with torch semantics (F.conv1d / F.conv2d / F.conv3d, F.conv_transpose1d) whose padding costs
// nothing: the kernel reads positions outside the input as zeros by bounds checks, so no padded copy and no extra
// dispatch exist. Asymmetric padding ([before, after] per dim) covers causal temporal convolutions (all of kt - 1 in
// front, none behind). conv1d and conv2d are lifted to the 5-D backend conv with size-1 leading spatial dims.
import { runKernel } from '../kernels/registry.js';
import type { Backend, ConvGeometry } from '../runtime/backend.js';
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

/** conv1d's padding: symmetric, [before, after], 'valid', 'same', or 'causal' (dilation * (k - 1) before, none after). */
export type Conv1dPadding = number | readonly [number, number] | 'valid' | 'same' | 'causal';

export interface Conv1dOptions {
  /** Default 1. */
  stride?: number | readonly [number];
  /** Default 0. 'causal': out[t] sees x[.. t] only, and the output has length L at stride 1. */
  padding?: Conv1dPadding;
  /** Spacing of the kernel taps; default 1. */
  dilation?: number | readonly [number];
  /** Input and output channels split into this many independent groups (C for depthwise); default 1. */
  groups?: number;
}

/**
 * torch F.conv1d: x [N, C, L] (or unbatched [C, L], giving [O, Lout]), weight [O, C / groups, k], bias [O]. Float
 * dtypes (any mix, strided views read in place); accumulates in float32; result in x's dtype. The backend's 5-D
 * conv on [N, C, 1, 1, L]: one dispatch on WebGPU, padding included.
 */
export function conv1d(x: Tensor, weight: Tensor, bias?: Tensor, options: Conv1dOptions = {}): Tensor {
  const p = options.padding;
  // A [before, after] pair is the per-dim list of one pair; every other form means what it means for conv2d.
  const padding = Array.isArray(p) && p.length === 2 && p.every((v) => typeof v === 'number') ? [p as readonly [number, number]] : p;
  return convNd('conv1d', 1, x, weight, bias, { stride: options.stride, dilation: options.dilation, groups: options.groups, padding: padding as NdPadding });
}

export interface ConvTranspose1dOptions {
  /** Default 1. */
  stride?: number | readonly [number];
  /** Zeros cropped from both ends of the full output (torch's padding of the transposed conv); default 0. */
  padding?: number | readonly [number];
  /** Extra positions added after the output (resolving which input length a strided conv came from); default 0. */
  outputPadding?: number | readonly [number];
  /** Default 1. */
  dilation?: number | readonly [number];
  /** Default 1. */
  groups?: number;
}

/**
 * torch F.conv_transpose1d, the adjoint of conv1d: x [N, C, L] (or unbatched [C, L]), weight [C, O / groups, k],
 * bias [O]; out [N, O, Lout] with Lout = (L - 1) * stride - 2 * padding + dilation * (k - 1) + outputPadding + 1.
 * outputPadding < max(stride, dilation), as torch checks. Float dtypes (any mix, strided views read in place);
 * accumulates in float32; result in x's dtype; one dispatch on WebGPU (a gather: no atomics).
 */
export function convTranspose1d(x: Tensor, weight: Tensor, bias?: Tensor, options: ConvTranspose1dOptions = {}): Tensor {
  const op = 'convTranspose1d';
  const backend = floatOperands(op, x, weight, bias);
  const unbatched = x.ndim === 2;
  if (x.ndim !== 3 && !unbatched) throw new ShapeError(`${op}: x must be [N, C, L] or [C, L], got ${x.describe()}`);
  if (weight.ndim !== 3) throw new ShapeError(`${op}: weight must be [C, O / groups, k], got ${weight.describe()}`);
  const groups = groupsOf(op, options.groups);
  const xView = unbatched ? withBatch(x.layout) : x.layout;
  const [n, c, l] = xView.shape;
  const [wc, og, k] = weight.shape;
  if (c % groups !== 0) throw new ShapeError(`${op}: ${c} input channels must be a multiple of groups ${groups}`);
  if (wc !== c)
    throw new ShapeError(`${op}: weight ${formatShape(weight.shape)} must be [C, O / groups, k] with x's ${c} channels first, x ${formatShape(x.shape)}`);
  const o = og * groups;
  if (bias && (bias.ndim !== 1 || bias.shape[0] !== o)) throw new ShapeError(`${op}: bias must be [${o}] (groups ${groups} x ${og}), got ${bias.describe()}`);
  const [stride] = perDim(op, 'stride', options.stride, 1, 1, 1);
  const [dilation] = perDim(op, 'dilation', options.dilation, 1, 1, 1);
  const [padding] = perDim(op, 'padding', options.padding, 1, 0, 0);
  const [outputPadding] = perDim(op, 'outputPadding', options.outputPadding, 1, 0, 0);
  if (outputPadding >= Math.max(stride, dilation)) {
    throw new ShapeError(`${op}: outputPadding ${outputPadding} must be smaller than stride ${stride} or dilation ${dilation}`);
  }
  // torch rejects empty non-batch dims; N = 0 is an empty result.
  if (l < 1) throw new ShapeError(`${op}: x ${formatShape(x.shape)} has an empty length dim`);
  const lout = (l - 1) * stride - 2 * padding + dilation * (k - 1) + outputPadding + 1;
  if (lout < 1) {
    throw new ShapeError(
      `${op}: output length (${l} - 1) * ${stride} - 2 * ${padding} + ${dilation} * (${k} - 1) + ${outputPadding} + 1 = ${lout} is too small, x ${formatShape(x.shape)}, weight ${formatShape(weight.shape)}`,
    );
  }
  const handle = runKernel('convTranspose1d', backend, {
    x: { ...x.operand(), view: xView },
    weight: weight.operand(),
    bias: bias?.operand(),
    geometry: { stride, padding, dilation, groups },
    outShape: [n, o, lout],
  });
  return wrap(backend, handle, x.dtype, unbatched ? [o, lout] : [n, o, lout]);
}

/** The backend of x, weight, bias and the extra inputs, all of float dtypes. */
function floatOperands(op: string, x: Tensor, weight: Tensor, bias: Tensor | undefined, ...extra: Tensor[]): Backend {
  const backend = commonBackend(op, x, weight, ...(bias ? [bias] : []), ...extra);
  for (const t of [x, weight, ...(bias ? [bias] : []), ...extra]) requireDTypes(op, t, FLOAT_DTYPES);
  return backend;
}

function groupsOf(op: string, groups: number | undefined): number {
  const g = groups ?? 1;
  if (!Number.isInteger(g) || g < 1) throw new ShapeError(`${op}: groups must be an integer >= 1, got ${g}`);
  return g;
}

/** An unbatched [C, ...] view as [1, C, ...] (no copy). */
function withBatch(v: View): View {
  return { shape: [1, ...v.shape], strides: [0, ...v.strides], offset: v.offset };
}

function perDim(op: string, what: string, v: number | readonly number[] | undefined, dims: number, fallback: number, min: number): number[] {
  const out = v === undefined ? new Array<number>(dims).fill(fallback) : typeof v === 'number' ? new Array<number>(dims).fill(v) : [...v];
  if (out.length !== dims || !out.every((s) => Number.isInteger(s) && s >= min)) {
    throw new ShapeError(`${op}: ${what} must be an integer >= ${min} or ${dims} of them, got ${JSON.stringify(v)}`);
  }
  return out;
}

/** [before, after] zeros per spatial dim. */
function paddingPairs(
  op: string,
  padding: NdPadding | undefined,
  dims: number,
  kernel: readonly number[],
  dilation: readonly number[],
  stride: readonly number[],
): [number, number][] {
  if (padding === 'valid' || padding === undefined) return kernel.map(() => [0, 0]);
  if (padding === 'causal') {
    if (dims !== 1) throw new ShapeError(`${op}: padding 'causal' is conv1d's; give [before, after] pairs per dim, got 'causal'`);
    return kernel.map((k, d) => [dilation[d] * (k - 1), 0]);
  }
  if (padding === 'same') {
    if (stride.some((s) => s !== 1)) throw new ShapeError(`${op}: padding 'same' needs stride 1, got [${stride.join(', ')}]`);
    return kernel.map((k, d) => {
      const total = dilation[d] * (k - 1);
      return [Math.floor(total / 2), total - Math.floor(total / 2)];
    });
  }
  const list = typeof padding === 'number' ? new Array<number>(dims).fill(padding) : padding;
  if (!Array.isArray(list) || list.length !== dims)
    throw new ShapeError(`${op}: padding must be a number, ${dims} numbers or ${dims} [before, after] pairs, got ${JSON.stringify(padding)}`);
  return list.map((p: number | readonly [number, number]) => {
    const pair = typeof p === 'number' ? [p, p] : Array.isArray(p) && p.length === 2 ? [p[0], p[1]] : undefined;
    if (!pair?.every((v) => Number.isInteger(v) && v >= 0)) {
      throw new ShapeError(`${op}: padding entries must be integers >= 0 or [before, after] pairs of them, got ${JSON.stringify(padding)}`);
    }
    return pair as [number, number];
  });
}

/** An [N, C, ...spatial] view with 1 to 3 spatial dims as 5-D [N, C, T, H, W], leading spatial dims of size 1 (no copy). */
function as5d(v: View): View {
  const missing = 5 - v.shape.length;
  if (missing === 0) return v;
  const ones = new Array<number>(missing);
  return {
    shape: [v.shape[0], v.shape[1], ...ones.fill(1), ...v.shape.slice(2)],
    strides: [v.strides[0], v.strides[1], ...ones.fill(0), ...v.strides.slice(2)],
    offset: v.offset,
  };
}

/** convNd's padding: conv2d/conv3d's forms, and conv1d's 'causal'. */
type NdPadding = ConvPadding | 'causal';

const LAYOUTS = { 1: ['[N, C, L] or [C, L]', 'k'], 2: ['[N, C, H, W]', 'kh, kw'], 3: ['[N, C, T, H, W]', 'kt, kh, kw'] } as const;

function convNd(
  op: string,
  dims: 1 | 2 | 3,
  x: Tensor,
  weight: Tensor,
  bias: Tensor | undefined,
  options: Omit<ConvOptions, 'padding'> & { padding?: NdPadding },
): Tensor {
  const prev = options.previous;
  if (prev && dims !== 3) throw new ShapeError(`${op}: previous (cached frames before x) needs a time dim; use conv3d, got previous ${prev.describe()}`);
  const backend = floatOperands(op, x, weight, bias, ...(prev ? [prev] : []));
  const [layout, taps] = LAYOUTS[dims];
  // torch's unbatched input, conv1d only (conv2d / conv3d keep requiring N).
  const unbatched = dims === 1 && x.ndim === dims + 1;
  if (x.ndim !== dims + 2 && !unbatched) throw new ShapeError(`${op}: x must be ${layout}, got ${x.describe()}`);
  if (weight.ndim !== dims + 2) throw new ShapeError(`${op}: weight must be [O, C / groups, ${taps}], got ${weight.describe()}`);
  const groups = groupsOf(op, options.groups);
  const xView = unbatched ? withBatch(x.layout) : x.layout;
  const xShape = xView.shape;
  const [n, c] = xShape;
  const [o, cg] = weight.shape;
  if (c % groups !== 0 || o % groups !== 0) throw new ShapeError(`${op}: ${c} input and ${o} output channels must both be multiples of groups ${groups}`);
  if (cg * groups !== c) {
    throw new ShapeError(
      `${op}: weight ${formatShape(weight.shape)} takes ${cg} channels per group, but x ${formatShape(x.shape)} has ${c} channels in ${groups} group(s) (${c / groups} each)`,
    );
  }
  if (bias && (bias.ndim !== 1 || bias.shape[0] !== o)) throw new ShapeError(`${op}: bias must be [${o}], got ${bias.describe()}`);
  const kernel = weight.shape.slice(2);
  const stride = perDim(op, 'stride', options.stride, dims, 1, 1);
  const dilation = perDim(op, 'dilation', options.dilation, dims, 1, 1);
  const pads = paddingPairs(op, options.padding, dims, kernel, dilation, stride);
  const spatial = xShape.slice(2).map((size, d) => {
    const span = dilation[d] * (kernel[d] - 1) + 1;
    const outSize = Math.floor((size + pads[d][0] + pads[d][1] - span) / stride[d]) + 1;
    if (outSize < 1) {
      throw new ShapeError(
        `${op}: spatial dim ${d} of x ${formatShape(x.shape)} padded by [${pads[d].join(', ')}] is ${size + pads[d][0] + pads[d][1]}, smaller than the dilated kernel span ${span}`,
      );
    }
    return outSize;
  });
  if (prev) {
    const [pn, pc, np, ph, pw] = prev.shape;
    if (prev.ndim !== 5 || pn !== n || pc !== c || ph !== x.shape[3] || pw !== x.shape[4]) {
      throw new ShapeError(
        `${op}: previous must be [${n}, ${c}, P, ${x.shape[3]}, ${x.shape[4]}] (x's N, C, H, W), got ${prev.describe()} for x ${formatShape(x.shape)}`,
      );
    }
    if (np > pads[0][0]) {
      throw new ShapeError(
        `${op}: previous ${formatShape(prev.shape)} has ${np} frames but the temporal padding before x is only ${pads[0][0]}; it replaces that many zeros at most`,
      );
    }
  }
  const outShape = [n, o, ...spatial];
  // The missing leading spatial dims: size 1, stride 1, dilation 1, no padding.
  const lift = (a: number[], fill: number) => [...new Array<number>(3 - dims).fill(fill), ...a];
  const geometry: ConvGeometry = {
    stride: lift(stride, 1),
    dilation: lift(dilation, 1),
    padBefore: lift(
      pads.map((p) => p[0]),
      0,
    ),
    groups,
  };
  const handle = runKernel('conv', backend, {
    x: { ...x.operand(), view: as5d(xView) },
    weight: { ...weight.operand(), view: as5d(weight.layout) },
    bias: bias?.operand(),
    geometry,
    outShape: [n, o, ...lift(spatial, 1)],
    previous: prev && prev.shape[2] > 0 ? prev.operand() : undefined,
  });
  return wrap(backend, handle, x.dtype, unbatched ? outShape.slice(1) : outShape);
}
