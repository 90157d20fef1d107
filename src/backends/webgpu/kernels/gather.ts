import { lanesPerWord } from '../../../core/dtype.js';
import { ShapeError } from '../../../core/errors.js';
import { numel } from '../../../core/shape.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';
import { commonWgsl, fillTemplate, grid1d, wgslSource } from './wgsl.js';

const WG = 256;

/** x.gather(dim, index) for any dtype and strided views; index int32 of x's rank. Contiguous output. */
export function gatherKernel(ctx: GpuContext, x: GpuOperand, dim: number, index: GpuOperand): GpuBuffer {
  const shape = index.view.shape;
  const rank = shape.length;
  if (rank > 8) throw new ShapeError(`gather supports at most 8 dims, got ${rank}`);
  const n = numel(shape);
  const lanes = lanesPerWord(x.dtype);
  const out = ctx.alloc(wordBytes(n, lanes));
  if (n === 0) return out;
  const bits = 32 / lanes;
  const pipeline = ctx.pipeline(`gather|${lanes}`, () =>
    commonWgsl() + fillTemplate(wgslSource(import.meta.url, 'gather.wgsl'), { LANES: lanes, BITS: bits, MASK: (2 ** bits - 1) >>> 0, WG }),
  );
  const u = new Uint32Array(32);
  u.set([n, rank, x.view.offset, index.view.offset]);
  shape.forEach((s, d) => (u[4 + d] = s));
  x.view.strides.forEach((s, d) => (u[12 + d] = d === dim ? 0 : s));
  index.view.strides.forEach((s, d) => (u[20 + d] = s));
  u[28] = x.view.shape[dim];
  u[29] = x.view.strides[dim];
  ctx.dispatch(pipeline, u.buffer, [out, x.buffer, index.buffer], grid1d(Math.ceil(n / lanes), WG));
  return out;
}
