// Launcher of the channel RMS norm (channel-rms-norm.wgsl): one dispatch, one invocation per (n, output word's
// positions); a packed 16-bit output with an odd T*H*W goes through float32 and a cast (two dispatches).
import { lanesPerWord, type DType } from '../../../core/dtype.js';
import { numel } from '../../../core/shape.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../gpu-context.js';
import { viaFloat32, type GpuOperand } from './elementwise.js';
import { uniformWords } from './nn-util.js';
import { commonWgsl, encodeFn, fillTemplate, grid1d, loadFn, wgslSource } from './wgsl.js';

const WG = 64;

export function channelRmsNormKernel(ctx: GpuContext, x: GpuOperand, weight: GpuOperand | undefined, eps: number, silu: boolean, outDtype: DType = x.dtype): GpuBuffer {
  const shape = x.view.shape;
  const [n, c, t, h, w] = shape;
  const s = t * h * w;
  const lanes = lanesPerWord(outDtype);
  if (lanes > 1 && s % lanes !== 0) {
    // Channels would share packed output words.
    return viaFloat32(ctx, shape, outDtype, false, () => channelRmsNormKernel(ctx, x, weight, eps, silu, 'float32'));
  }
  const out = ctx.alloc(wordBytes(numel(shape), lanes));
  if (numel(shape) === 0) return out;
  const key = ['channel-rms-norm', x.dtype, weight?.dtype ?? 'none', outDtype, silu ? 'silu' : ''].join('|');
  const pipeline = ctx.pipeline(key, () =>
    commonWgsl() +
    fillTemplate(wgslSource(import.meta.url, 'channel-rms-norm.wgsl'), {
      WEIGHT_BINDING: weight ? '@group(0) @binding(3) var<storage, read> wbuf: array<u32>;' : '',
      FUNCTIONS: loadFn('load_x', 'xbuf', x.dtype, 'f32') + (weight ? loadFn('load_w', 'wbuf', weight.dtype, 'f32') : '') + encodeFn('encode_out', outDtype, 'f32'),
      APPLY_WEIGHT: weight ? 'y * load_w(p.w_off + c * p.ws)' : 'y',
      ACTIVATION: silu ? 'v / (1.0 + exp(-v))' : 'v',
      WG,
      LANES: lanes,
      BITS: 32 / lanes,
    }),
  );
  const columns = (n * s) / lanes;
  const params = uniformWords([columns, c, s, h, w, x.view.offset, ...x.view.strides, weight?.view.offset ?? 0, weight?.view.strides[0] ?? 0, { f32: eps }]);
  ctx.dispatch(pipeline, params, weight ? [out, x.buffer, weight.buffer] : [out, x.buffer], grid1d(columns, WG));
  return out;
}
