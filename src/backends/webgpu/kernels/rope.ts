// Launcher of the rotary-embedding kernel (rope.wgsl): one invocation per output word; x, cos and sin are read
// through their strides (q/k often arrive as views of a fused projection), positions come from the uniform offset.
import { lanesPerWord } from '../../../core/dtype.js';
import { numel } from '../../../core/shape.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';
import { uniformWords } from './nn-util.js';
import { commonWgsl, encodeFn, fillTemplate, grid1d, loadFn, wgslSource } from './wgsl.js';

const WG = 256;

export function ropeKernel(ctx: GpuContext, x: GpuOperand, cos: GpuOperand, sin: GpuOperand, positionOffset: number): GpuBuffer {
  const [, h, d] = x.view.shape;
  const n = numel(x.view.shape);
  const lanes = lanesPerWord(x.dtype);
  const out = ctx.alloc(wordBytes(n, lanes));
  if (n === 0) return out;
  const pipeline = ctx.pipeline(['rope', x.dtype].join('|'), () =>
    commonWgsl() +
    fillTemplate(wgslSource(import.meta.url, 'rope.wgsl'), {
      FUNCTIONS: loadFn('load0', 'in0', x.dtype, 'f32') + encodeFn('encode_out', x.dtype, 'f32'),
      LANES: lanes,
      BITS: 32 / lanes,
    }),
  );
  const [xs0, xs1, xs2] = x.view.strides;
  const params = uniformWords([
    n, h, d, d / 2,
    x.view.offset, xs0, xs1, xs2,
    cos.view.offset, cos.view.strides[0], cos.view.strides[1],
    sin.view.offset, sin.view.strides[0], sin.view.strides[1],
    positionOffset,
  ]);
  ctx.dispatch(pipeline, params, [out, x.buffer, cos.buffer, sin.buffer], grid1d(Math.ceil(n / lanes), WG));
  return out;
}
