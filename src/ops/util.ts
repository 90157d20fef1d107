import type { Backend } from '../runtime/backend.js';
import type { DType } from '../core/dtype.js';
import { DeviceMismatchError, DTypeError } from '../core/errors.js';
import type { Shape, View } from '../core/shape.js';
import { Tensor } from '../core/tensor.js';
import './tensor-methods.js';

/**
 * The ops that take int64 tensors (ops/int64.ts routes them): data movement, the elementwise ops (whose routing
 * refuses the ones int64 lacks by name), the reductions but mean, and cumsum. Every other op raises a DTypeError
 * naming itself.
 */
const INT64_OPS: ReadonlySet<string> = new Set([
  ...['to', 'toArray', 'toBytes', 'clone', 'copyInto', 'cat', 'where', 'indexSelect', 'gather', 'scatter', 'sort', 'cumsum'],
  ...['sum', 'prod', 'max', 'min', 'argmax', 'argmin'],
  ...['add', 'sub', 'mul', 'div', 'pow', 'maximum', 'minimum', 'remainder', 'fmod', 'floor_divide'],
  ...['eq', 'ne', 'lt', 'le', 'gt', 'ge'],
]);

/** What int64 tensors take, for the errors that refuse one (here and ops/int64.ts refuseInt64). */
export const INT64_SUPPORTED =
  'supported on int64: add, sub, mul, pow, neg, abs, floor / ceil / round / relu / sign, float functions (exp, sin, ... as float32), maximum, minimum, floor_divide, div with rounding_mode, remainder, fmod, comparisons, where, sum, prod, max, min, argmax, argmin, cumsum, sort, topk, cat, indexing (indexSelect, gather, scatter, scatterAdd) and casts';

/** The one backend all inputs live on; mixing devices is an error (as in PyTorch), never an implicit copy. */
export function commonBackend(op: string, ...tensors: Tensor[]): Backend {
  const first = tensors[0].storage.backend;
  for (const t of tensors) {
    if (t.dtype === 'int64' && !INT64_OPS.has(op))
      throw new DTypeError(`${op} does not support int64 (tensor ${t.describe()}); ${INT64_SUPPORTED}: cast it first`);
    if (t.storage.backend !== first) {
      throw new DeviceMismatchError(
        `${op}: expected all tensors on one device, got ${tensors.map((x) => `${x.describe()} on ${x.device}`).join(' and ')}; move one with await t.to('${first.device}')`,
      );
    }
  }
  return first;
}

/** A new contiguous tensor around a backend handle. */
export function wrap(backend: Backend, handle: unknown, dtype: DType, shape: Shape): Tensor {
  return Tensor.fromHandle(backend, handle, dtype, shape);
}

/** A view sharing the storage of t. */
export function viewOf(t: Tensor, view: View): Tensor {
  return new Tensor(t.storage, view, t.dtype);
}

/** A one-element device scalar of dtype: a captured step's position or draw, read by kernels in place of a number. */
export function requireDeviceScalar(op: string, what: string, t: Tensor, dtype: DType): void {
  if (t.dtype !== dtype || t.numel !== 1) throw new DTypeError(`${op}: ${what} must be ${dtype} with one element, got ${t.describe()}`);
}

export function requireDTypes(op: string, t: Tensor, allowed: readonly DType[]): void {
  if (!allowed.includes(t.dtype)) {
    throw new DTypeError(`${op} does not take ${t.dtype} (tensor ${t.describe()}); supported: ${allowed.join(', ')}`);
  }
}

/**
 * For async code, where a tidy scope cannot follow the awaits: `disposeLater` collects intermediates, disposed once
 * fn's promise settles (fn's result survives unless passed to it). The opposite of core/scope.ts' `keep`, which
 * exempts a tensor from disposal.
 */
export async function withTempsAsync<T>(fn: (disposeLater: (t: Tensor) => Tensor) => Promise<T>): Promise<T> {
  const temps: Tensor[] = [];
  try {
    return await fn((t) => (temps.push(t), t));
  } finally {
    for (const t of temps) t.dispose();
  }
}
