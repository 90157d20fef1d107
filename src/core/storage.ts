import type { Backend, DeviceName } from '../runtime/backend.js';
import type { DType } from './dtype.js';

/**
 * One allocation on one backend, shared by a tensor and all its views. Freed when the last tensor holding it
 * is disposed, so disposing a base tensor never invalidates a view of it.
 */
export class Storage {
  private refs = 0;
  /** Bumped by every in-place write (copyInto, writeTensor): autograd refuses a saved tensor written since. */
  version = 0;

  constructor(
    readonly backend: Backend,
    readonly handle: unknown,
    readonly dtype: DType,
    readonly length: number,
  ) {}

  get device(): DeviceName {
    return this.backend.device;
  }

  /** Tensors holding this storage (views included). */
  get holders(): number {
    return Math.max(this.refs, 0);
  }

  get freed(): boolean {
    return this.refs < 0;
  }

  retain(): void {
    this.refs++;
  }

  release(): void {
    if (--this.refs === 0) {
      this.refs = -1;
      this.backend.free(this.handle);
    }
  }
}
