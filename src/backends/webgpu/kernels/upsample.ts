// Launcher of 2x nearest / bilinear upsampling (upsample.wgsl): one dispatch, one invocation per output word, x read
// through its strides.
import { lanesPerWord } from '../../../core/dtype.js';
import type { UpsampleMode } from '../../backend.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';
import { uniformWords } from './nn-util.js';
import { commonWgsl, encodeFn, fillTemplate, grid1d, loadFn, wgslSource } from './wgsl.js';

const WG = 256;

const NEAREST = 'return load_x(plane + (oh / 2u) * p.xs_h + (ow / 2u) * p.xs_w);';

const BILINEAR = `let th = tap(oh, p.h);
  let tw = tap(ow, p.w);
  let r0 = plane + u32(th.x) * p.xs_h;
  let r1 = plane + u32(th.y) * p.xs_h;
  let c0 = u32(tw.x) * p.xs_w;
  let c1 = u32(tw.y) * p.xs_w;
  let top = (1.0 - tw.z) * load_x(r0 + c0) + tw.z * load_x(r0 + c1);
  let bottom = (1.0 - tw.z) * load_x(r1 + c0) + tw.z * load_x(r1 + c1);
  return (1.0 - th.z) * top + th.z * bottom;`;

export function upsample2xKernel(ctx: GpuContext, x: GpuOperand, mode: UpsampleMode): GpuBuffer {
  const [n, c, t, h, w] = x.view.shape;
  const total = n * c * t * 4 * h * w;
  const lanes = lanesPerWord(x.dtype);
  const out = ctx.alloc(wordBytes(total, lanes));
  if (total === 0) return out;
  const pipeline = ctx.pipeline(['upsample2x', mode, x.dtype].join('|'), () =>
    commonWgsl() +
    fillTemplate(wgslSource(import.meta.url, 'upsample.wgsl'), {
      FUNCTIONS: loadFn('load_x', 'xbuf', x.dtype, 'f32') + encodeFn('encode_out', x.dtype, 'f32'),
      BODY: mode === 'nearest' ? NEAREST : BILINEAR,
      WG,
      LANES: lanes,
      BITS: 32 / lanes,
    }),
  );
  const params = uniformWords([total, c, t, h, w, x.view.offset, ...x.view.strides]);
  ctx.dispatch(pipeline, params, [out, x.buffer], grid1d(total / lanes, WG));
  return out;
}
