import { lanesPerWord, type DType } from '../../../core/dtype.js';
import { numel } from '../../../core/shape.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';
import { commonWgsl, fillTemplate, grid1d, wgslSource } from './wgsl.js';

const WG = 256;

/** x (contiguous view, any offset) indexed along dim by a contiguous int32 index -> contiguous output. */
export function indexSelectKernel(ctx: GpuContext, x: GpuOperand, dim: number, index: GpuOperand): GpuBuffer {
  const shape = x.view.shape;
  const nIdx = numel(index.view.shape);
  const inner = numel(shape.slice(dim + 1));
  const n = numel(shape.slice(0, dim)) * nIdx * inner;
  const dtype: DType = x.dtype;
  const lanes = lanesPerWord(dtype);
  const out = ctx.alloc(wordBytes(n, lanes));
  if (n === 0) return out;
  const bits = 32 / lanes;
  const pipeline = ctx.pipeline(`index_select|${lanes}`, () =>
    commonWgsl() +
    fillTemplate(wgslSource(import.meta.url, 'index-select.wgsl'), { LANES: lanes, BITS: bits, MASK: (2 ** bits - 1) >>> 0, WG }),
  );
  const params = new Uint32Array([n, shape[dim], inner, nIdx, x.view.offset, index.view.offset, 0, 0]);
  ctx.dispatch(pipeline, params.buffer, [out, x.buffer, index.buffer], grid1d(Math.ceil(n / lanes), WG));
  return out;
}
