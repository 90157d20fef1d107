// The WebGPU kernel of resample: its description (defineKernel) and launcher.
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';

const resample = defineKernel({
  name: 'resample',
  source: 'resample.wgsl',
  variant: { dtype: 'dtype' },
  params: { total: 'u32', length: 'u32', phases: 'u32', width: 'u32', stride: 'u32', pad_left: 'u32', t_len: 'u32', x_off: 'u32', x_s0: 'u32', x_s1: 'u32' },
  outputs: { out: 'f32' },
  inputs: { x: { packed: 'dtype' }, kernel: 'f32' },
  grid: { threads: 'total', invoke: 'resample_at' },
});

/** kernel: contiguous float32 [P, W]; x: [B, T] of any float dtype and strides. */
export function resampleKernel(ctx: GpuContext, x: GpuOperand, kernel: GpuOperand, stride: number, padLeft: number, length: number): GpuBuffer {
  const [batch, t] = x.view.shape;
  const [phases, width] = kernel.view.shape;
  const total = batch * length;
  const out = ctx.alloc(wordBytes(total, 1));
  if (total === 0) return out;
  resample.run(
    ctx,
    { dtype: x.dtype },
    { total, length, phases, width, stride, pad_left: padLeft, t_len: t, x_off: x.view.offset, x_s0: x.view.strides[0], x_s1: x.view.strides[1] },
    { out, x: x.buffer, kernel: kernel.buffer },
  );
  return out;
}
