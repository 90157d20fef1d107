import { lanesPerWord } from '../../../core/dtype.js';
import { numel, type Shape } from '../../../core/shape.js';
import type { ConvGeometry } from '../../backend.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';
import { uniformWords } from './nn-util.js';
import { commonWgsl, encodeFn, fillTemplate, grid1d, loadFn, wgslSource } from './wgsl.js';

const WG = 256;

/**
 * F.conv3d of strided views x [N, C, T, H, W], weight [O, C/groups, kt, kh, kw] and bias [O] in one dispatch, with
 * zero padding done by bounds checks (see conv.wgsl); contiguous output of outShape in x's dtype.
 */
export function convKernel(ctx: GpuContext, x: GpuOperand, weight: GpuOperand, bias: GpuOperand | undefined, g: ConvGeometry, outShape: Shape): GpuBuffer {
  const n = numel(outShape);
  const lanes = lanesPerWord(x.dtype);
  const out = ctx.alloc(wordBytes(n, lanes));
  if (n === 0) return out;
  const key = ['conv', x.dtype, weight.dtype, bias ? bias.dtype : 'nobias'].join('|');
  const pipeline = ctx.pipeline(key, () =>
    commonWgsl() +
    fillTemplate(wgslSource(import.meta.url, 'conv.wgsl'), {
      BIAS_BINDING: bias ? '@group(0) @binding(4) var<storage, read> bbuf: array<u32>;' : '',
      FUNCTIONS:
        loadFn('load_x', 'xbuf', x.dtype, 'f32') +
        loadFn('load_w', 'wbuf', weight.dtype, 'f32') +
        (bias ? loadFn('load_b', 'bbuf', bias.dtype, 'f32') : '') +
        encodeFn('encode_out', x.dtype, 'f32'),
      BIAS: bias ? 'load_b(p.b_off + oc * p.bs)' : '0.0',
      WG,
      LANES: lanes,
      BITS: 32 / lanes,
    }),
  );
  const [, o, to, ho, wo] = outShape;
  const [, , t, h, w] = x.view.shape;
  const [, cg, kt, kh, kw] = weight.view.shape;
  const params = uniformWords([
    n, o, to, ho, wo, cg, o / g.groups, t, h, w, kt, kh, kw,
    ...g.stride, ...g.dilation, ...g.padBefore.map((v) => ({ i32: v })),
    x.view.offset, ...x.view.strides,
    weight.view.offset, ...weight.view.strides,
    bias ? bias.view.offset : 0, bias ? bias.view.strides[0] : 0,
  ]);
  ctx.dispatch(pipeline, params, [out, x.buffer, weight.buffer, ...(bias ? [bias.buffer] : [])], grid1d(Math.ceil(n / lanes), WG));
  return out;
}
