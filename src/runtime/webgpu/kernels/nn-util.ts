// Launcher helpers shared by the transformer-block kernels (rms-norm, rope, attention, swiglu).
import { contiguousView, isContiguous } from '../../../core/shape.js';
import type { GpuBuffer, GpuContext } from '../gpu-context.js';
import { castKernel, type GpuOperand } from './elementwise.js';

/** Runs kernel on x, or on a contiguous copy of x (released afterwards) when x's view is strided. */
export function withContiguous<R>(ctx: GpuContext, x: GpuOperand, kernel: (x: GpuOperand) => R): R {
  if (isContiguous(x.view)) return kernel(x);
  const compact: GpuBuffer = castKernel(ctx, x, x.dtype, false);
  try {
    return kernel({ buffer: compact, dtype: x.dtype, view: contiguousView(x.view.shape) });
  } finally {
    ctx.release(compact);
  }
}

/** The smallest power of two >= x (1 for x <= 1): pipelines specialised per power of two, not per size. */
export function pow2AtLeast(x: number): number {
  return 2 ** Math.ceil(Math.log2(Math.max(1, x)));
}
