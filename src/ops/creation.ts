import { getDefaultDevice, backendFor } from '../runtime/registry.js';
import type { DeviceName } from '../runtime/backend.js';
import { encodeInt64, encodeValues } from '../core/codecs.js';
import { isFloating, parseDType, type DType } from '../core/dtype.js';
import { DTypeError, ShapeError } from '../core/errors.js';
import { defaultGenerator, type Generator } from '../core/random.js';
import { checkShape, formatShape, numel, type Shape } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { wrap } from './util.js';
import { traceConstant } from '../compile/trace.js';

export interface CreateOptions {
  dtype?: DType | string;
  device?: DeviceName;
  /** fp8 only: clamp out-of-range values to the largest finite value instead of NaN/Inf. */
  saturate?: boolean;
  /** A leaf that gradients flow to (floating dtypes only), as torch's requires_grad=True. */
  requiresGrad?: boolean;
}

/** Applies options.requiresGrad to a new leaf. */
function leaf(t: Tensor, options: CreateOptions): Tensor {
  return options.requiresGrad ? t.requiresGrad_() : t;
}

export interface RandomOptions extends CreateOptions {
  generator?: Generator;
}

type Nested = number | boolean | readonly Nested[];
export type TensorData = Nested | Float32Array | Float64Array | Int32Array | Uint8Array | Uint16Array | Int16Array | Int8Array | BigInt64Array;

function resolve(options: CreateOptions, fallback: DType): { dtype: DType; device: DeviceName } {
  return {
    dtype: options.dtype === undefined ? fallback : parseDType(options.dtype),
    device: options.device ?? getDefaultDevice(),
  };
}

function fromValues(values: ArrayLike<number>, shape: Shape, options: CreateOptions, fallback: DType): Tensor {
  checkShape(shape);
  const { dtype, device } = resolve(options, fallback);
  const backend = backendFor(device);
  return wrap(backend, backend.upload(dtype, encodeValues(dtype, values, { saturate: options.saturate })), dtype, shape);
}

/** Shape of nested arrays, checking they are not ragged. */
function nestedShape(data: Nested, path = 'data'): number[] {
  if (!Array.isArray(data)) return [];
  const arr = data as readonly Nested[];
  if (arr.length === 0) return [0];
  const inner = nestedShape(arr[0], `${path}[0]`);
  for (let i = 1; i < arr.length; i++) {
    const s = nestedShape(arr[i], `${path}[${i}]`);
    if (s.join() !== inner.join()) {
      throw new ShapeError(`ragged nested array: ${path}[0] has shape ${formatShape(inner)} but ${path}[${i}] has ${formatShape(s)}`);
    }
  }
  return [arr.length, ...inner];
}

function flattenNested(data: Nested, out: number[]): boolean {
  if (Array.isArray(data)) {
    let allBool = true;
    for (const x of data as readonly Nested[]) allBool = flattenNested(x, out) && allBool;
    return allBool;
  }
  if (typeof data === 'boolean') {
    out.push(data ? 1 : 0);
    return true;
  }
  if (typeof data !== 'number') throw new DTypeError(`tensor(): expected numbers or booleans, got ${typeof data}`);
  out.push(data);
  return false;
}

/**
 * A tensor from nested arrays, a number, or a typed array (give `shape` for a typed array that is not 1-D).
 * Numbers default to float32, booleans to bool, Int32Array to int32, Uint8Array to uint8, BigInt64Array to int64
 * (int64 from numbers: exact up to 2^53, a RangeError past it).
 */
export function tensor(data: TensorData, options: CreateOptions & { shape?: readonly number[] } = {}): Tensor {
  if (data instanceof BigInt64Array) {
    // int64 values exactly, past 2^53 too; another dtype is a cast from them.
    const shape = options.shape ?? [data.length];
    if (numel(shape) !== data.length) throw new ShapeError(`tensor(): shape ${formatShape(shape)} does not hold ${data.length} values`);
    checkShape(shape);
    const { dtype, device } = resolve(options, 'int64');
    const backend = backendFor(device);
    const wide = wrap(backend, backend.upload('int64', encodeInt64(data)), 'int64', shape);
    if (dtype === 'int64') return leaf(wide, options);
    const out = wide.to(dtype);
    wide.dispose();
    return leaf(out, options);
  }
  if (ArrayBuffer.isView(data)) {
    const shape = options.shape ?? [data.length];
    if (numel(shape) !== data.length) throw new ShapeError(`tensor(): shape ${formatShape(shape)} does not hold ${data.length} values`);
    const fallback = data instanceof Int32Array ? 'int32' : data instanceof Uint8Array ? 'uint8' : 'float32';
    return leaf(fromValues(data, shape, options, fallback), options);
  }
  const shape = nestedShape(data);
  const flat: number[] = [];
  const allBool = flattenNested(data, flat) && flat.length > 0;
  if (options.shape && numel(options.shape) !== flat.length)
    throw new ShapeError(`tensor(): shape ${formatShape(options.shape)} does not hold ${flat.length} values`);
  return leaf(fromValues(flat, options.shape ?? shape, options, allBool ? 'bool' : 'float32'), options);
}

export function full(shape: readonly number[], value: number, options: CreateOptions = {}): Tensor {
  checkShape(shape);
  const { dtype, device } = resolve(options, 'float32');
  const backend = backendFor(device);
  return leaf(wrap(backend, backend.fill(dtype, numel(shape), value), dtype, shape), options);
}

export function zeros(shape: readonly number[], options: CreateOptions = {}): Tensor {
  return full(shape, 0, options);
}

export function ones(shape: readonly number[], options: CreateOptions = {}): Tensor {
  return full(shape, 1, options);
}

/** Values start, start+step, ... below end (torch.arange); int32 when all arguments are integers. */
export function arange(start: number, end?: number, step = 1, options: CreateOptions = {}): Tensor {
  if (end === undefined) [start, end] = [0, start];
  if (step === 0 || !Number.isFinite(step)) throw new ShapeError(`arange(): step must be a non-zero finite number, got ${step}`);
  const n = Math.max(0, Math.ceil((end - start) / step));
  const values = new Float64Array(n);
  for (let i = 0; i < n; i++) values[i] = start + i * step;
  const integral = [start, end, step].every(Number.isInteger);
  // Its values follow from its arguments alone: a compiled function keeps them as a constant.
  return traceConstant(() => fromValues(values, [n], options, integral ? 'int32' : 'float32'));
}

function random(shape: readonly number[], options: RandomOptions, draw: (g: Generator, dtype: DType) => number): Tensor {
  checkShape(shape);
  const dtype = options.dtype === undefined ? 'float32' : parseDType(options.dtype);
  if (!isFloating(dtype)) throw new DTypeError(`random tensors must be floating point, got ${dtype}`);
  const g = options.generator ?? defaultGenerator;
  const values = new Float32Array(numel(shape));
  for (let i = 0; i < values.length; i++) values[i] = draw(g, dtype);
  return leaf(fromValues(values, shape, { ...options, dtype }, 'float32'), options);
}

/**
 * Significand bits (implicit one included) of each float dtype. rand draws only that many random bits, so every
 * value k * 2^-bits is exact in the dtype: a finer float32 draw would round up to 1 in f16/bf16/fp8 (as torch.rand).
 */
const UNIFORM_BITS: Partial<Record<DType, number>> = { float32: 24, float16: 11, bfloat16: 8, float8_e4m3fn: 4, float8_e5m2: 3 };

/** Uniform in [0, 1), drawn from the seeded generator (the same values on every device). */
export function rand(shape: readonly number[], options: RandomOptions = {}): Tensor {
  return random(shape, options, (g, dtype) => {
    const bits = UNIFORM_BITS[dtype] ?? 24;
    return (g.nextU32() >>> (32 - bits)) / 2 ** bits;
  });
}

/** Standard normal, drawn from the seeded generator (the same values on every device). */
export function randn(shape: readonly number[], options: RandomOptions = {}): Tensor {
  return random(shape, options, (g) => g.normal());
}
