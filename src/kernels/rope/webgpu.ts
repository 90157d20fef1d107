// Launcher of the rotary-embedding kernel (rope.wgsl): one invocation per output word; x, cos and sin are read
// through their strides (q/k often arrive as views of a fused projection), positions come from the uniform offset.
import { lanesPerWord } from '../../core/dtype.js';
import { numel } from '../../core/shape.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';

const rope = defineKernel({
  name: 'rope',
  source: 'rope.wgsl',
  variant: { dtype: 'dtype' },
  params: {
    n: 'u32',
    h: 'u32',
    d: 'u32',
    half: 'u32',
    x_off: 'u32',
    xs0: 'u32',
    xs1: 'u32',
    xs2: 'u32',
    cos_off: 'u32',
    cs0: 'u32',
    cs1: 'u32',
    sin_off: 'u32',
    ss0: 'u32',
    ss1: 'u32',
    pos0: 'u32',
  },
  outputs: { out: { packed: 'dtype' } },
  inputs: { x: { packed: 'dtype' }, cos_t: 'f32', sin_t: 'f32' },
  grid: { words: 'n', element: 'rope_at' },
});

export function ropeKernel(ctx: GpuContext, x: GpuOperand, cos: GpuOperand, sin: GpuOperand, positionOffset: number): GpuBuffer {
  const [, h, d] = x.view.shape;
  const n = numel(x.view.shape);
  const out = ctx.alloc(wordBytes(n, lanesPerWord(x.dtype)));
  if (n === 0) return out;
  const [xs0, xs1, xs2] = x.view.strides;
  rope.run(
    ctx,
    { dtype: x.dtype },
    {
      n,
      h,
      d,
      half: cos.view.shape[1],
      x_off: x.view.offset,
      xs0,
      xs1,
      xs2,
      cos_off: cos.view.offset,
      cs0: cos.view.strides[0],
      cs1: cos.view.strides[1],
      sin_off: sin.view.offset,
      ss0: sin.view.strides[0],
      ss1: sin.view.strides[1],
      pos0: positionOffset,
    },
    { out, x: x.buffer, cos_t: cos.buffer, sin_t: sin.buffer },
  );
  return out;
}
