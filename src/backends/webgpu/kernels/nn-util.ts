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

/** A uniform block of u32 words with f32 / i32 fields written by bits (std140-free: all fields are 4 bytes). */
export function uniformWords(fields: readonly (number | { f32: number } | { i32: number })[]): ArrayBuffer {
  const words = Math.ceil(fields.length / 4) * 4;
  const buf = new ArrayBuffer(words * 4);
  const dv = new DataView(buf);
  fields.forEach((f, i) => {
    if (typeof f === 'number') dv.setUint32(i * 4, f >>> 0, true);
    else if ('f32' in f) dv.setFloat32(i * 4, f.f32, true);
    else dv.setInt32(i * 4, f.i32, true);
  });
  return buf;
}
