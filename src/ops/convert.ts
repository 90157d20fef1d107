import type { DeviceName } from '../runtime/backend.js';
import { backendFor } from '../runtime/registry.js';
import { decodeStorage } from '../core/codecs.js';
import { isFloating, parseDType, type DType } from '../core/dtype.js';
import { ShapeError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import { commonBackend, viewOf, wrap } from './util.js';
import { differentiable } from '../autograd/function.js';
import { castInt64, int64Numbers } from './int64.js';

export { toBigInt64Array } from './int64.js';

export interface CastOptions {
  /** fp8 targets: clamp to the largest finite value instead of PyTorch's overflow to NaN/Inf. */
  saturate?: boolean;
}

export function cast(t: Tensor, dtype: DType | string, options: CastOptions = {}): Tensor {
  const target = parseDType(dtype);
  const backend = commonBackend('to', t);
  // int64 on either side of a conversion goes to the int64 kernels (an int64 copy stays a backend cast of its words).
  if ((t.dtype === 'int64') !== (target === 'int64')) return castInt64(t, target);
  const forward = () => wrap(backend, backend.cast(t.operand(), target, options.saturate ?? false), target, t.shape);
  if (!isFloating(target)) return forward(); // an integer result carries no gradient
  // The gradient comes back in t's dtype (the sweep casts it).
  return differentiable('to', [t], forward, (g) => [g.reshape(g.shape)]);
}

/**
 * Values widened for JS: Float32Array for every float dtype, Int32Array for int32, Uint8Array for uint8/bool. int64
 * is a DTypeError here (this type has no BigInt64Array): use toBigInt64Array(t), or tolist()/item().
 */
export async function toArray(t: Tensor): Promise<Float32Array | Int32Array | Uint8Array> {
  const backend = commonBackend('toArray', t);
  return decodeStorage(t.dtype, await backend.read(t.operand()));
}

/** The raw little-endian storage bytes in row-major order (FP8 one byte a value, bf16 two): what files hold. */
export async function toBytes(t: Tensor): Promise<Uint8Array> {
  const codes = await commonBackend('toBytes', t).read(t.operand());
  return new Uint8Array(codes.buffer, codes.byteOffset, codes.byteLength);
}

/** Nested arrays of numbers (int64: a RangeError for a value past 2^53; read those with toBigInt64Array). */
export async function tolist(t: Tensor): Promise<unknown> {
  const flat = t.dtype === 'int64' ? await int64Numbers(t) : Array.from(await toArray(t), (v) => (t.dtype === 'bool' ? v !== 0 : v));
  const build = (dim: number, at: number): unknown => {
    if (dim === t.ndim) return flat[at];
    const stride = t.shape.slice(dim + 1).reduce((a, b) => a * b, 1);
    return Array.from({ length: t.shape[dim] }, (_, i) => build(dim + 1, at + i * stride));
  };
  return build(0, 0);
}

export async function item(t: Tensor): Promise<number> {
  if (t.numel !== 1) throw new ShapeError(`item() needs a tensor with one element, got ${t.describe()}`);
  return t.dtype === 'int64' ? (await int64Numbers(t))[0] : (await toArray(t))[0];
}

/** Copies t to another device (reads back from the GPU when leaving it, hence async). */
export async function toDevice(t: Tensor, device: DeviceName): Promise<Tensor> {
  const from = commonBackend('to', t);
  const to = backendFor(device);
  if (to === from) return viewOf(t, t.layout);
  const codes = await from.read(t.operand());
  return wrap(to, to.upload(t.dtype, codes), t.dtype, t.shape);
}
