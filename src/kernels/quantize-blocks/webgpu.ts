// Launcher of quantize-blocks.wgsl: blockwise FP8 quantization in two dispatches.
import type { QuantizeBlocks } from '../../runtime/backend.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { grid1d, workgroupReduce } from '../../runtime/webgpu/kernels/wgsl.js';

/** Invocations of an `encode` workgroup (one output word each); `amax` runs the description's WG per block. */
const ENCODE_WG = 256;

const quantizeBlocks = defineKernel({
  name: 'quantize_blocks',
  source: 'quantize-blocks.wgsl',
  variant: { x: 'dtype', q: 'dtype' },
  params: {
    rows: 'u32',
    cols: 'u32',
    bh: 'u32',
    bw: 'u32',
    kb: 'u32', // blocks per block row: ceil(cols / bw)
    n_blocks: 'u32',
    x_off: 'u32',
    fmax: 'f32',
  },
  // Both entry points share one layout, so amax binds `out` too (it does not touch it).
  outputs: { scale: 'f32', out: { packed: 'q', saturate: true } },
  inputs: { x: { packed: 'x' } },
  grid: 'custom',
  workgroupSize: 128,
  constants: () => ({ ENCODE_WG }),
  functions: () => workgroupReduce({ name: 'block_amax', type: 'f32', combine: 'amax_combine(a, b)' }),
});

/** x: a contiguous [rows, cols] view (any offset) of a float dtype. Returns [FP8 codes, float32 scales]. */
export function quantizeBlocksKernel(ctx: GpuContext, x: GpuOperand, q: QuantizeBlocks): [GpuBuffer, GpuBuffer] {
  const [rows, cols] = x.view.shape;
  const kb = Math.ceil(cols / q.blockCols);
  const nBlocks = Math.ceil(rows / q.blockRows) * kb;
  const n = rows * cols;
  const data = ctx.alloc(wordBytes(n, 4));
  const scale = ctx.alloc(Math.max(4, nBlocks * 4));
  if (n === 0) return [data, scale];
  const variant = { x: x.dtype, q: q.dtype };
  const params = { rows, cols, bh: q.blockRows, bw: q.blockCols, kb, n_blocks: nBlocks, x_off: x.view.offset, fmax: q.fmax };
  const buffers = { scale, out: data, x: x.buffer };
  quantizeBlocks.run(ctx, variant, params, buffers, { entry: 'amax', workgroups: grid1d(nBlocks, 1) });
  quantizeBlocks.run(ctx, variant, params, buffers, { entry: 'encode', workgroups: grid1d(Math.ceil(n / 4), ENCODE_WG) });
  return [data, scale];
}
