// Launcher of group norm (group-norm.wgsl): one workgroup per (n, group), one dispatch; a packed 16-bit output whose
// groups are not whole words goes through float32 and a cast (two dispatches).
import { lanesPerWord, type DType } from '../../../core/dtype.js';
import { numel } from '../../../core/shape.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../gpu-context.js';
import { viaFloat32, type GpuOperand } from './elementwise.js';
import { uniformWords } from './nn-util.js';
import { commonWgsl, encodeFn, fillTemplate, grid1d, loadFn, wgslSource } from './wgsl.js';

/** Groups this large get 256 invocations; small ones 64 (SwiftShader and real GPUs pay per idle invocation). */
const LARGE_GROUP = 16384;

export function groupNormKernel(ctx: GpuContext, x: GpuOperand, numGroups: number, weight: GpuOperand | undefined, bias: GpuOperand | undefined, eps: number, outDtype: DType = x.dtype): GpuBuffer {
  const shape = x.view.shape;
  const [n, c, t, h, w] = shape;
  const total = numel(shape);
  const cg = c / numGroups;
  const count = cg * t * h * w;
  const lanes = lanesPerWord(outDtype);
  if (lanes > 1 && count % lanes !== 0) {
    // Neighbouring groups would share packed output words.
    return viaFloat32(ctx, shape, outDtype, false, () => groupNormKernel(ctx, x, numGroups, weight, bias, eps, 'float32'));
  }
  const out = ctx.alloc(wordBytes(total, lanes));
  if (total === 0) return out;
  const wg = count >= LARGE_GROUP ? 256 : 64;
  const key = ['group-norm', x.dtype, weight?.dtype ?? 'none', bias?.dtype ?? 'none', outDtype, wg].join('|');
  let affine = 'y';
  if (weight) affine = `${affine} * load_w(p.w_off + c * p.ws)`;
  if (bias) affine = `${affine} + load_b(p.b_off + c * p.bs)`;
  const pipeline = ctx.pipeline(key, () =>
    commonWgsl() +
    fillTemplate(wgslSource(import.meta.url, 'group-norm.wgsl'), {
      WEIGHT_BINDING: weight ? '@group(0) @binding(3) var<storage, read> wbuf: array<u32>;' : '',
      BIAS_BINDING: bias ? `@group(0) @binding(${weight ? 4 : 3}) var<storage, read> bbuf: array<u32>;` : '',
      FUNCTIONS:
        loadFn('load_x', 'xbuf', x.dtype, 'f32') +
        (weight ? loadFn('load_w', 'wbuf', weight.dtype, 'f32') : '') +
        (bias ? loadFn('load_b', 'bbuf', bias.dtype, 'f32') : '') +
        encodeFn('encode_out', outDtype, 'f32'),
      AFFINE: affine,
      WG: wg,
      LANES: lanes,
      BITS: 32 / lanes,
    }),
  );
  const params = uniformWords([
    n * numGroups, numGroups, cg, t * h * w, h, w,
    x.view.offset, ...x.view.strides,
    weight?.view.offset ?? 0, weight?.view.strides[0] ?? 0,
    bias?.view.offset ?? 0, bias?.view.strides[0] ?? 0,
    { f32: eps },
  ]);
  const buffers = [out, x.buffer, ...(weight ? [weight.buffer] : []), ...(bias ? [bias.buffer] : [])];
  ctx.dispatch(pipeline, params, buffers, grid1d(n * numGroups, 1));
  return out;
}
