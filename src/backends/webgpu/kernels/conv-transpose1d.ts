// Launcher of the transposed 1-D convolution (conv-transpose1d.wgsl): one dispatch, one output word (1 or 2
// elements) per invocation, strided views of any float dtypes read in place, float32 accumulation.
import { lanesPerWord, type DType } from '../../../core/dtype.js';
import { numel, type Shape } from '../../../core/shape.js';
import type { ConvTranspose1dGeometry } from '../../backend.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';
import { defineKernel } from './kernel.js';

const convTranspose1d = defineKernel({
  name: 'conv_transpose1d',
  source: 'conv-transpose1d.wgsl',
  // bias: its dtype, or 'none'.
  variant: { dtype: 'dtype', weight: 'dtype', bias: 'string' },
  params: {
    n: 'u32', // output elements
    o: 'u32', og: 'u32', cg: 'u32', // output channels, per group; input channels per group
    lout: 'u32', l: 'u32', k: 'u32',
    stride: 'u32', dil: 'u32', pad: 'i32',
    jstep: 'u32', // stride / gcd(stride, dilation): taps between two whole input positions
    x_off: 'u32', xs_n: 'u32', xs_c: 'u32', xs_l: 'u32',
    w_off: 'u32', ws_c: 'u32', ws_o: 'u32', ws_k: 'u32',
    b_off: 'u32', bs: 'u32',
  },
  outputs: { out: { packed: 'dtype' } },
  inputs: {
    x: { packed: 'dtype' },
    weight: { packed: 'weight' },
    bias: { packed: (v) => v.bias as DType, when: (v) => v.bias !== 'none' },
  },
  grid: { words: 'n', element: 'conv_transpose1d_at' },
  code: (v) => ({ BIAS: v.bias !== 'none' ? 'load_bias(p.b_off + oc * p.bs)' : '0.0' }),
});

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/**
 * F.conv_transpose1d of strided views x [N, C, L], weight [C, O/groups, k] and bias [O] (see
 * Backend.convTranspose1d): contiguous output of outShape [N, O, Lout] in x's dtype; no dispatch when it is empty.
 */
export function convTranspose1dKernel(ctx: GpuContext, x: GpuOperand, weight: GpuOperand, bias: GpuOperand | undefined, g: ConvTranspose1dGeometry, outShape: Shape): GpuBuffer {
  const n = numel(outShape);
  const out = ctx.alloc(wordBytes(n, lanesPerWord(x.dtype)));
  if (n === 0) return out;
  const [, c, l] = x.view.shape;
  const [, og, k] = weight.view.shape;
  const [, o, lout] = outShape;
  const [xs_n, xs_c, xs_l] = x.view.strides;
  const [ws_c, ws_o, ws_k] = weight.view.strides;
  convTranspose1d.run(
    ctx,
    { dtype: x.dtype, weight: weight.dtype, bias: bias ? bias.dtype : 'none' },
    {
      n, o, og, cg: c / g.groups, lout, l, k,
      stride: g.stride, dil: g.dilation, pad: g.padding, jstep: g.stride / gcd(g.stride, g.dilation),
      x_off: x.view.offset, xs_n, xs_c, xs_l,
      w_off: weight.view.offset, ws_c, ws_o, ws_k,
      b_off: bias ? bias.view.offset : 0, bs: bias ? bias.view.strides[0] : 0,
    },
    { out, x: x.buffer, weight: weight.buffer, bias: bias?.buffer },
  );
  return out;
}
