// Typed errors: each names the offending value so a user can act without a debugger.

export class TensorGpuError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** Shapes that do not fit together (broadcasting, matmul inner dims, reshape sizes, dims out of range). */
export class ShapeError extends TensorGpuError {}

/** A dtype an op does not take, or an unknown dtype name. */
export class DTypeError extends TensorGpuError {}

/** Tensors on different devices mixed in one op, or a tensor used on a device it does not live on. */
export class DeviceMismatchError extends TensorGpuError {}

/** Work a captured step cannot hold (a host write or read while recording, too many uniforms), or a disposed step. */
export class CaptureError extends TensorGpuError {}

/** A tensor used after `dispose()`. */
export class DisposedError extends TensorGpuError {}

/** The requested device cannot be used; `reason` and `hint` say why and what to do. */
export class DeviceUnavailableError extends TensorGpuError {
  /** The full diagnosis when one was made (see `diagnose()`). */
  diagnosed?: import('../runtime/webgpu/diagnose.js').Diagnosis;

  constructor(
    readonly reason: string,
    readonly hint?: string,
  ) {
    super(hint ? `${reason}\n  hint: ${hint}` : reason);
  }
}

/** Where in a checkpoint a problem is: the file, the tensor and the byte offset in the file, as far as known. */
export interface CheckpointLocation {
  readonly file?: string;
  readonly tensor?: string;
  readonly offset?: number;
}

/** A checkpoint or tensor file that fails validation; the message starts with the file, tensor and byte offset. */
export class CheckpointError extends TensorGpuError {
  readonly file?: string;
  readonly tensor?: string;
  readonly offset?: number;

  constructor(problem: string, where: CheckpointLocation = {}) {
    const place = [
      where.file,
      where.tensor !== undefined ? `tensor '${where.tensor}'` : undefined,
      where.offset !== undefined ? `byte ${where.offset}` : undefined,
    ].filter((x) => x !== undefined);
    super(place.length > 0 ? `${place.join(', ')}: ${problem}` : problem);
    this.file = where.file;
    this.tensor = where.tensor;
    this.offset = where.offset;
  }
}

/**
 * A Node-only function (files on disk, the WebGPU adapter probe's child process, Dawn) called where no Node host is
 * installed: in a browser, or in Node through the browser entry. `fn` names it.
 */
export class NodeOnlyError extends TensorGpuError {
  constructor(readonly fn: string) {
    super(
      `${fn} is Node-only (files on disk, child processes, Dawn): a browser has none; in Node, import 'tensorgpu' (the Node entry), not 'tensorgpu/browser'`,
    );
  }
}

/**
 * An index outside the dim it indexes (torch's IndexError): raised at once on the CPU; on WebGPU a kernel records
 * the first bad index in a device-side flag and the next read back or synchronize() raises it, naming the op (the
 * model is CUDA's device-side assert). A ShapeError too, which is what these raised before the flag existed.
 */
export class IndexError extends ShapeError {
  constructor(
    message: string,
    /** The op that read the index (indexSelect, gather, crossEntropy, ...). */
    readonly op?: string,
    /** The offending index, where known. */
    readonly index?: number,
  ) {
    super(message);
  }
}

/**
 * An integer division (floor_divide, remainder, fmod, div with a rounding mode) by zero: torch's CPU raises
 * "ZeroDivisionError". Raised at once on the CPU; on WebGPU the kernel records it in the device-side error flag and
 * the next read back or synchronize() raises it, as IndexError.
 */
export class ZeroDivisionError extends TensorGpuError {
  constructor(
    /** The op that divided (floor_divide, remainder or fmod). */
    readonly op: string,
    where = '',
  ) {
    super(`${op}: integer division by zero${where}`);
  }
}

/** An in-place op autograd cannot allow (torch's "a leaf Variable that requires grad is being used in an in-place operation"). */
export class InPlaceError extends TensorGpuError {}
