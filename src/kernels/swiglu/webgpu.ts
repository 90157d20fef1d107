// Launcher of the SwiGLU kernel (swiglu.wgsl): one invocation per output word of x [..., 2I] -> [..., I].
import { numel } from '../../core/shape.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import { lanesPerWord } from '../../core/dtype.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { withContiguous } from '../../runtime/webgpu/kernels/nn-util.js';

const swiglu = defineKernel({
  name: 'swiglu',
  source: 'swiglu.wgsl',
  variant: { dtype: 'dtype' },
  params: { n: 'u32', half: 'u32', offset: 'u32' },
  outputs: { out: { packed: 'dtype' } },
  inputs: { x: { packed: 'dtype' } },
  grid: { words: 'n', element: 'swiglu_at' },
});

export function swigluKernel(ctx: GpuContext, x: GpuOperand): GpuBuffer {
  const shape = x.view.shape;
  const half = shape[shape.length - 1] / 2;
  const n = numel(shape) / 2;
  const out = ctx.alloc(wordBytes(n, lanesPerWord(x.dtype)));
  if (n === 0) return out;
  return withContiguous(ctx, x, (cx) => {
    swiglu.run(ctx, { dtype: x.dtype }, { n, half, offset: cx.view.offset }, { out, x: cx.buffer });
    return out;
  });
}
