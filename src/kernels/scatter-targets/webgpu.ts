// Launcher of scatter-targets.wgsl: one invocation per index word, the index read through its strides in place.
import { int64WordView } from '../../core/dtype.js';
import { ShapeError } from '../../core/errors.js';
import { numel } from '../../core/shape.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { DEVICE_ERROR_WGSL, deviceErrorCode } from '../../runtime/webgpu/kernels/device-error.js';
import { RAW_ENCODE } from '../gather/webgpu.js';

const scatterTargets = defineKernel({
  name: 'scatter_targets',
  source: 'scatter-targets.wgsl',
  variant: { wide: 'boolean' },
  params: { n: 'u32', rank: 'u32', idx_off: 'u32', dim: 'u32', dim_size: 'u32', shape: 'u32[8]', idx_strides: 'u32[8]', x_strides: 'u32[8]' },
  outputs: { out: { packed: () => 'int32', helpers: false }, err: 'atomic<u32>' },
  inputs: { idx: 'u32' },
  grid: { words: 'n', element: 'scatter_target_at' },
  constants: (v) => ({ ERR_OP: deviceErrorCode('scatter'), WIDE: v.wide ? 1 : 0 }),
  functions: () => RAW_ENCODE + DEVICE_ERROR_WGSL,
});

/**
 * int32 [numel(index)]: each index element's flat position in a contiguous x (strides xStrides), or -1 (reported in
 * the device error flag) for a value outside [0, dimSize). index: int32 or int64, any view of rank <= 8.
 */
export function scatterTargetsKernel(ctx: GpuContext, index: GpuOperand, dim: number, dimSize: number, xStrides: readonly number[]): GpuBuffer {
  const shape = index.view.shape;
  const rank = shape.length;
  if (rank > 8) throw new ShapeError(`scatter supports at most 8 dims, got ${rank}`);
  const n = numel(shape);
  const out = ctx.alloc(wordBytes(n, 1));
  if (n === 0) return out;
  const wide = index.dtype === 'int64';
  const view = wide ? int64WordView(index.view) : index.view;
  scatterTargets.run(
    ctx,
    { wide },
    { n, rank, idx_off: view.offset, dim, dim_size: dimSize, shape, idx_strides: view.strides.slice(0, rank), x_strides: xStrides },
    { out, err: ctx.deviceErrorFlag(), idx: index.buffer },
  );
  return out;
}
