// Normalization and upsampling blocks of convolutional VAEs (Wan2.1 / Wan2.2, Qwen-Image): torch F.group_norm, Wan's
// RMS_norm over channels, and F.interpolate 2x over H and W. Each is one kernel on the GPU (two when a 16-bit
// output's rows would share packed words); inputs are read through their strides, never copied first.
import { runKernel } from '../kernels/registry.js';
import type { UpsampleMode } from '../runtime/backend.js';
import { ShapeError } from '../core/errors.js';
import { formatShape, type View } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { commonBackend, requireDTypes, wrap } from './util.js';

export type { UpsampleMode } from '../runtime/backend.js';

const FLOAT_DTYPES = ['float32', 'float16', 'bfloat16'] as const;

/** [N, C, ...spatial] with up to 3 spatial dims as 5-D [N, C, T, H, W] (missing dims of size 1, no copy). */
function as5d(v: View): View {
  const missing = 5 - v.shape.length;
  return {
    shape: [v.shape[0], v.shape[1], ...new Array<number>(missing).fill(1), ...v.shape.slice(2)],
    strides: [v.strides[0], v.strides[1], ...new Array<number>(missing).fill(0), ...v.strides.slice(2)],
    offset: v.offset,
  };
}

function channelFirst(op: string, x: Tensor, minRank: number, layout: string): number {
  requireDTypes(op, x, FLOAT_DTYPES);
  if (x.ndim < minRank || x.ndim > 5) throw new ShapeError(`${op}: x must be ${layout}, got ${x.describe()}`);
  return x.shape[1];
}

function checkPerChannel(op: string, what: string, t: Tensor | undefined, c: number, x: Tensor): void {
  if (!t) return;
  requireDTypes(op, t, FLOAT_DTYPES);
  if (t.ndim !== 1 || t.shape[0] !== c) throw new ShapeError(`${op}: ${what} must be [${c}] for x ${formatShape(x.shape)}, got ${formatShape(t.shape)}`);
}

function checkEps(op: string, eps: number): void {
  if (!(eps >= 0) || !Number.isFinite(eps)) throw new RangeError(`${op}: eps must be a finite number >= 0, got ${eps}`);
}

/**
 * torch F.group_norm: x [N, C, ...spatial] (up to 3 spatial dims), C split into numGroups groups of consecutive
 * channels, each (n, group) normalized by its mean and biased variance over its channels and all positions, then
 * scaled by weight [C] and shifted by bias [C] (each optional). Float32 inside; result in x's dtype.
 */
export function groupNorm(x: Tensor, numGroups: number, weight?: Tensor, bias?: Tensor, eps = 1e-5): Tensor {
  const op = 'groupNorm';
  const backend = commonBackend(op, x, ...(weight ? [weight] : []), ...(bias ? [bias] : []));
  const c = channelFirst(op, x, 2, '[N, C, ...spatial] with at most 3 spatial dims');
  if (!Number.isInteger(numGroups) || numGroups < 1 || c % numGroups !== 0) {
    throw new ShapeError(`${op}: numGroups must be an integer >= 1 dividing the ${c} channels of x ${formatShape(x.shape)}, got ${numGroups}`);
  }
  checkPerChannel(op, 'weight', weight, c, x);
  checkPerChannel(op, 'bias', bias, c, x);
  checkEps(op, eps);
  const handle = runKernel('groupNorm', backend, {
    x: { ...x.operand(), view: as5d(x.layout) },
    numGroups,
    weight: weight?.operand(),
    bias: bias?.operand(),
    eps,
  });
  return wrap(backend, handle, x.dtype, x.shape);
}

/**
 * RMS norm over the channel dim (Wan2.x's RMS_norm, channel_first): x [N, C, ...spatial] (up to 3 spatial dims),
 * y = x / sqrt(mean over C of x^2 + eps) * weight[c], weight [C] optional. Float32 inside; result in x's dtype.
 * Wan computes F.normalize(x, dim=1) * sqrt(C) * gamma, which is this with eps = 0 except for all-zero columns.
 * `activation: 'silu'` applies SiLU in the same pass (the norm + activation that precedes every VAE conv).
 */
export function channelRmsNorm(x: Tensor, weight: Tensor | undefined, eps: number, options: { activation?: 'silu' } = {}): Tensor {
  const op = 'channelRmsNorm';
  const backend = commonBackend(op, x, ...(weight ? [weight] : []));
  const c = channelFirst(op, x, 2, '[N, C, ...spatial] with at most 3 spatial dims');
  checkPerChannel(op, 'weight', weight, c, x);
  checkEps(op, eps);
  if (options.activation !== undefined && options.activation !== 'silu')
    throw new RangeError(`${op}: activation must be 'silu' or undefined, got ${String(options.activation)}`);
  return wrap(
    backend,
    runKernel('channelRmsNorm', backend, { x: { ...x.operand(), view: as5d(x.layout) }, weight: weight?.operand(), eps, silu: options.activation === 'silu' }),
    x.dtype,
    x.shape,
  );
}

export interface UpsampleOptions {
  /** Only 2 (the VAE's resample layers). */
  scale: 2;
  mode: UpsampleMode;
}

/**
 * torch F.interpolate(x, scale_factor=2, mode) over H and W only: x [N, C, H, W] or [N, C, T, H, W] (frames kept
 * as they are) -> H and W doubled. 'nearest' copies; 'bilinear' uses align_corners=false. Result in x's dtype.
 */
export function upsample(x: Tensor, options: UpsampleOptions): Tensor {
  const op = 'upsample';
  const backend = commonBackend(op, x);
  requireDTypes(op, x, FLOAT_DTYPES);
  if (x.ndim !== 4 && x.ndim !== 5) throw new ShapeError(`${op}: x must be [N, C, H, W] or [N, C, T, H, W], got ${x.describe()}`);
  if (options.scale !== 2) throw new RangeError(`${op}: only scale 2 is supported, got ${String(options.scale)}`);
  if (options.mode !== 'nearest' && options.mode !== 'bilinear')
    throw new RangeError(`${op}: mode must be 'nearest' or 'bilinear', got ${String(options.mode)}`);
  const shape = [...x.shape.slice(0, -2), 2 * x.shape[x.ndim - 2], 2 * x.shape[x.ndim - 1]];
  return wrap(backend, runKernel('upsample2x', backend, { x: { ...x.operand(), view: as5d(x.layout) }, mode: options.mode }), x.dtype, shape);
}
