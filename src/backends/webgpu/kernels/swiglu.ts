// Launcher of the SwiGLU kernel (swiglu.wgsl): one invocation per output word of x [..., 2I] -> [..., I].
import { lanesPerWord } from '../../../core/dtype.js';
import { numel } from '../../../core/shape.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';
import { withContiguous, uniformWords } from './nn-util.js';
import { commonWgsl, encodeFn, fillTemplate, grid1d, loadFn, wgslSource } from './wgsl.js';

const WG = 256;

export function swigluKernel(ctx: GpuContext, x: GpuOperand): GpuBuffer {
  const shape = x.view.shape;
  const half = shape[shape.length - 1] / 2;
  const n = numel(shape) / 2;
  const lanes = lanesPerWord(x.dtype);
  const out = ctx.alloc(wordBytes(n, lanes));
  if (n === 0) return out;
  return withContiguous(ctx, x, (cx) => {
    const pipeline = ctx.pipeline(['swiglu', x.dtype].join('|'), () =>
      commonWgsl() +
      fillTemplate(wgslSource(import.meta.url, 'swiglu.wgsl'), {
        FUNCTIONS: loadFn('load0', 'in0', x.dtype, 'f32') + encodeFn('encode_out', x.dtype, 'f32'),
        LANES: lanes,
        BITS: 32 / lanes,
      }),
    );
    ctx.dispatch(pipeline, uniformWords([n, half, cx.view.offset]), [out, cx.buffer], grid1d(Math.ceil(n / lanes), WG));
    return out;
  });
}
