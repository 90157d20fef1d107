// The WebGPU kernel of overlapAdd: its description (defineKernel) and launcher.
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';

const overlapAdd = defineKernel({
  name: 'overlap_add',
  source: 'overlap-add.wgsl',
  variant: { fdtype: 'dtype', wdtype: 'dtype' },
  params: {
    total: 'u32',
    length: 'u32',
    pad_left: 'u32',
    n_fft: 'u32',
    hop: 'u32',
    frames: 'u32',
    f_off: 'u32',
    f_s0: 'u32',
    f_s1: 'u32',
    f_s2: 'u32',
    w_off: 'u32',
    w_s: 'u32',
  },
  outputs: { out: 'f32' },
  inputs: { frames: { packed: 'fdtype' }, window: { packed: 'wdtype' } },
  grid: { threads: 'total', invoke: 'overlap_add_at' },
});

export function overlapAddKernel(ctx: GpuContext, frames: GpuOperand, window: GpuOperand, hop: number, padLeft: number, length: number): GpuBuffer {
  const [batch, count, nFft] = frames.view.shape;
  const total = batch * length;
  const out = ctx.alloc(wordBytes(total, 1));
  if (total === 0) return out;
  const s = frames.view.strides;
  overlapAdd.run(
    ctx,
    { fdtype: frames.dtype, wdtype: window.dtype },
    {
      total,
      length,
      pad_left: padLeft,
      n_fft: nFft,
      hop,
      frames: count,
      f_off: frames.view.offset,
      f_s0: s[0],
      f_s1: s[1],
      f_s2: s[2],
      w_off: window.view.offset,
      w_s: window.view.strides[0] ?? 0,
    },
    { out, frames: frames.buffer, window: window.buffer },
  );
  return out;
}
