// Launcher of quantize-blocks.wgsl: blockwise FP8 quantization in two dispatches.
import type { DType } from '../../../core/dtype.js';
import type { QuantizeBlocks } from '../../backend.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';
import { commonWgsl, encodeFn, fillTemplate, grid1d, loadFn, wgslSource } from './wgsl.js';

/** x: a contiguous [rows, cols] view (any offset) of a float dtype. Returns [FP8 codes, float32 scales]. */
export function quantizeBlocksKernel(ctx: GpuContext, x: GpuOperand, q: QuantizeBlocks): [GpuBuffer, GpuBuffer] {
  const [rows, cols] = x.view.shape;
  const kb = Math.ceil(cols / q.blockCols);
  const nBlocks = Math.ceil(rows / q.blockRows) * kb;
  const n = rows * cols;
  const data = ctx.alloc(wordBytes(n, 4));
  const scale = ctx.alloc(Math.max(4, nBlocks * 4));
  if (n === 0) return [data, scale];
  const key = ['quantize_blocks', x.dtype, q.dtype].join('|');
  const source = () =>
    commonWgsl() +
    fillTemplate(wgslSource(import.meta.url, 'quantize-blocks.wgsl'), {
      FUNCTIONS: loadFn('load_x', 'x', x.dtype, 'f32') + encodeFn('encode_out', q.dtype as DType, 'f32', true),
    });
  const params = new ArrayBuffer(32);
  new Uint32Array(params).set([rows, cols, q.blockRows, q.blockCols, kb, nBlocks, x.view.offset]);
  new Float32Array(params)[7] = q.fmax;
  // Both entry points share one layout, so amax binds `out` too (it does not touch it).
  ctx.dispatch(ctx.pipeline(key, source, 'amax'), params, [scale, x.buffer, data], grid1d(nBlocks, 1));
  ctx.dispatch(ctx.pipeline(key, source, 'encode'), params, [scale, x.buffer, data], grid1d(Math.ceil(n / 4), 256));
  return [data, scale];
}
