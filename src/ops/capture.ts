// Captured steps as an op-level API: record the dispatches a function queues, then replay them with no host work
// beyond encoding (WebGPU only). Inputs that change between replays must be tensors whose contents the caller
// rewrites with writeTensor (a position, a draw, a token id), never numbers baked into the recorded kernels.
import { webgpuBackend } from '../runtime/registry.js';
import type { CapturedStep } from '../runtime/webgpu/capture.js';
import { DTYPE_INFO } from '../core/dtype.js';
import { CaptureError, DTypeError, ShapeError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';

/** A recorded sequence of dispatches; replay() queues them again (the tensors it touched must stay alive). */
export class CapturedGraph {
  constructor(private readonly step: CapturedStep) {}

  get dispatches(): number {
    return this.step.dispatches.length;
  }

  replay(): void {
    const backend = webgpuBackend();
    if (!backend) throw new CaptureError(`captured step '${this.step.label}': its WebGPU device was released`);
    backend.replay(this.step);
  }

  dispose(): void {
    this.step.dispose();
  }
}

/**
 * Runs fn once (its work is queued as usual) while recording it on the WebGPU device. fn must not read back, upload
 * or write host data into tensors (a CaptureError is thrown, and nothing is recorded). Returns fn's result and the
 * graph, or no graph when WebGPU is not in use.
 */
export function capture<T>(label: string, fn: () => T): { result: T; graph?: CapturedGraph } {
  const backend = webgpuBackend();
  if (!backend) return { result: fn() };
  backend.beginCapture(label);
  let result: T;
  try {
    result = fn();
    if (result instanceof Promise) throw new CaptureError(`capture '${label}': fn must be synchronous`);
  } catch (e) {
    backend.abortCapture();
    throw e;
  }
  return { result, graph: new CapturedGraph(backend.endCapture()) };
}

/** Writes host values into an existing contiguous float32 / int32 tensor, after all work queued before it. */
export function writeTensor(t: Tensor, values: ArrayLike<number>): void {
  if (t.dtype !== 'float32' && t.dtype !== 'int32') throw new DTypeError(`writeTensor takes float32 or int32 tensors, got ${t.describe()}`);
  if (!t.isContiguous() || values.length !== t.numel)
    throw new ShapeError(`writeTensor: ${values.length} values for ${t.describe()} (must be contiguous, same size)`);
  const data = t.dtype === 'float32' ? Float32Array.from(values) : Int32Array.from(values);
  const backend = t.storage.backend;
  // A queued write lands before commands still being encoded: submit them first so it comes after them.
  if (backend.device === 'webgpu') webgpuBackend()?.flush();
  backend.writeBytes(t.storage.handle, t.offset * DTYPE_INFO[t.dtype].itemBytes, new Uint8Array(data.buffer));
  t.storage.version++;
}
