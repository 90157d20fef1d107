// Launcher of sum-int.wgsl: one workgroup per output element, 64-bit integer partial sums merged by a fixed tree,
// the result checked against int32's range (an overflow is reported in the device error flag).
import { numel } from '../../core/shape.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import { DEVICE_ERROR_WGSL, deviceErrorCode } from '../../runtime/webgpu/kernels/device-error.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { grid1d, workgroupReduce } from '../../runtime/webgpu/kernels/wgsl.js';

const ADD64 = `
fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let lo = a.x + b.x;
  return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}
`;

const sumInt = defineKernel({
  name: 'sum_int',
  source: 'sum-int.wgsl',
  variant: { dtype: 'dtype' },
  params: { outputs: 'u32', size: 'u32', inner: 'u32', x_off: 'u32' },
  outputs: { out: 'i32', err: 'atomic<u32>' },
  inputs: { x: { packed: 'dtype', compute: 'i32' } },
  grid: 'custom',
  workgroupSize: () => 64,
  constants: () => ({ ERR_OP: deviceErrorCode('sum') }),
  functions: () => ADD64 + DEVICE_ERROR_WGSL + workgroupReduce({ name: 'sum64', type: 'vec2<u32>', combine: 'add64(a, b)' }),
});

/** Contiguous x summed over dim into a contiguous int32 result (x's shape without dim). */
export function sumIntKernel(ctx: GpuContext, x: GpuOperand, dim: number): GpuBuffer {
  const shape = x.view.shape;
  const outputs = numel(shape.slice(0, dim)) * numel(shape.slice(dim + 1));
  const out = ctx.alloc(wordBytes(outputs, 1));
  if (outputs === 0) return out;
  sumInt.run(
    ctx,
    { dtype: x.dtype },
    { outputs, size: shape[dim], inner: numel(shape.slice(dim + 1)), x_off: x.view.offset },
    { out, err: ctx.deviceErrorFlag(), x: x.buffer },
    { workgroups: grid1d(outputs, 1) },
  );
  return out;
}
