// Launcher of 2x nearest / bilinear upsampling (upsample.wgsl): one dispatch, one invocation per output word, x read
// through its strides.
import { lanesPerWord } from '../../core/dtype.js';
import type { UpsampleMode } from '../../runtime/backend.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';

const SAMPLE: Record<UpsampleMode, string> = {
  nearest: 'return load_x(plane + (oh / 2u) * p.xs_h + (ow / 2u) * p.xs_w);',
  bilinear: `let th = tap(oh, p.h);
  let tw = tap(ow, p.w);
  let r0 = plane + u32(th.x) * p.xs_h;
  let r1 = plane + u32(th.y) * p.xs_h;
  let c0 = u32(tw.x) * p.xs_w;
  let c1 = u32(tw.y) * p.xs_w;
  let top = (1.0 - tw.z) * load_x(r0 + c0) + tw.z * load_x(r0 + c1);
  let bottom = (1.0 - tw.z) * load_x(r1 + c0) + tw.z * load_x(r1 + c1);
  return (1.0 - th.z) * top + th.z * bottom;`,
};

const upsample2x = defineKernel({
  name: 'upsample2x',
  source: 'upsample.wgsl',
  variant: { mode: ['nearest', 'bilinear'], dtype: 'dtype' },
  params: { n: 'u32', c: 'u32', t: 'u32', h: 'u32', w: 'u32', x_off: 'u32', xs_n: 'u32', xs_c: 'u32', xs_t: 'u32', xs_h: 'u32', xs_w: 'u32' },
  outputs: { out: { packed: 'dtype' } },
  inputs: { x: { packed: 'dtype' } },
  grid: { words: 'n', element: 'upsample_at' },
  code: (v) => ({ SAMPLE: SAMPLE[v.mode] }),
});

export function upsample2xKernel(ctx: GpuContext, x: GpuOperand, mode: UpsampleMode): GpuBuffer {
  const [n, c, t, h, w] = x.view.shape;
  const total = n * c * t * 4 * h * w;
  const out = ctx.alloc(wordBytes(total, lanesPerWord(x.dtype)));
  if (total === 0) return out;
  const [xs_n, xs_c, xs_t, xs_h, xs_w] = x.view.strides;
  upsample2x.run(ctx, { mode, dtype: x.dtype }, { n: total, c, t, h, w, x_off: x.view.offset, xs_n, xs_c, xs_t, xs_h, xs_w }, { out, x: x.buffer });
  return out;
}
