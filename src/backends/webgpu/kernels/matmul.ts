import { ShapeError } from '../../../core/errors.js';
import { coalesceViews, formatShape, numel } from '../../../core/shape.js';
import type { MatmulDims } from '../../backend.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';
import { commonWgsl, fillTemplate, loadFn, wgslSource } from './wgsl.js';

const TILE = 64;

/** [...batch, m, k] @ [...batch, k, n] -> contiguous float32 [...batch, m, n] (callers cast other output dtypes). */
export function matmulKernel(ctx: GpuContext, a: GpuOperand, b: GpuOperand, dims: MatmulDims): GpuBuffer {
  const { m, n, k } = dims;
  const batchCount = numel(dims.batch);
  const out = ctx.alloc(wordBytes(batchCount * m * n, 1));
  if (batchCount * m * n === 0) return out;
  const r = dims.batch.length;
  const [ba, bb] = coalesceViews([
    { shape: dims.batch, strides: a.view.strides.slice(0, r), offset: 0 },
    { shape: dims.batch, strides: b.view.strides.slice(0, r), offset: 0 },
  ]);
  if (ba.shape.length > 4) throw new ShapeError(`matmul supports at most 4 non-mergeable batch dims, got batch ${formatShape(dims.batch)}`);
  if (batchCount > ctx.limits.maxComputeWorkgroupsPerDimension) {
    throw new ShapeError(`matmul batch of ${batchCount} exceeds the device limit of ${ctx.limits.maxComputeWorkgroupsPerDimension}`);
  }
  const pipeline = ctx.pipeline(['matmul', a.dtype, b.dtype].join('|'), () =>
    commonWgsl() +
    fillTemplate(wgslSource(import.meta.url, 'matmul.wgsl'), {
      FUNCTIONS: loadFn('load0', 'in0', a.dtype, 'f32') + loadFn('load1', 'in1', b.dtype, 'f32'),
    }),
  );
  const u = new Uint32Array(24);
  const as = a.view.strides;
  const bs = b.view.strides;
  u.set([m, n, k, ba.shape.length, a.view.offset, as[r], as[r + 1], b.view.offset, bs[r], bs[r + 1]]);
  ba.shape.forEach((s, d) => (u[12 + d] = s));
  ba.strides.forEach((s, d) => (u[16 + d] = s));
  bb.strides.forEach((s, d) => (u[20 + d] = s));
  ctx.dispatch(pipeline, u.buffer, [out, a.buffer, b.buffer], [Math.ceil(n / TILE), Math.ceil(m / TILE), batchCount]);
  return out;
}
