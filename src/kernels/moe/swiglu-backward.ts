// Launcher of SwiGLU's fused backward (swiglu-backward.wgsl): the gradient at the gate|up input of every MoE slot
// (or any SwiGLU row) in one dispatch, one invocation per output element (float32 output, one per word).
import { numel } from '../../core/shape.js';
import type { GpuBuffer, GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { withContiguous } from '../../runtime/webgpu/kernels/nn-util.js';

const swigluBackward = defineKernel({
  name: 'swiglu-backward',
  source: 'swiglu-backward.wgsl',
  variant: { x: 'dtype' },
  params: { n: 'u32', half: 'u32', x_off: 'u32', g_off: 'u32' },
  outputs: { out: { packed: () => 'float32' } },
  inputs: { x: { packed: 'x' }, grad: 'f32' },
  grid: { words: 'n', element: 'swiglu_backward_at' },
});

/** x [..., 2I] (any float dtype), g float32 [..., I] -> float32 [..., 2I], contiguous. */
export function swigluBackwardKernel(ctx: GpuContext, x: GpuOperand, g: GpuOperand): GpuBuffer {
  const n = numel(x.view.shape);
  const half = x.view.shape[x.view.shape.length - 1] / 2;
  const out = ctx.alloc(Math.max(4, n * 4));
  if (n === 0) return out;
  return withContiguous(ctx, x, (cx) =>
    withContiguous(ctx, g, (cg) => {
      swigluBackward.run(ctx, { x: x.dtype }, { n, half, x_off: cx.view.offset, g_off: cg.view.offset }, { out, x: cx.buffer, grad: cg.buffer });
      return out;
    }),
  );
}
