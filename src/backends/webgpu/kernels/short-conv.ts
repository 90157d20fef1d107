// Launcher of short-conv.wgsl: LFM2's gated causal conv of one layer, its state read and updated in the same dispatch.
import type { ShortConvArgs } from '../../backend.js';
import type { GpuBuffer, GpuContext } from '../gpu-context.js';
import { uniformWords } from './nn-util.js';
import { commonWgsl, fillTemplate, grid1d, loadFn, wgslSource } from './wgsl.js';

/** Taps - 1 the kernel's register window holds (LFM2 uses 3 taps). */
export const SHORT_CONV_MAX_WINDOW = 8; // ops/short-conv.ts allows at most 9 taps

/** Returns float32 [S, H]; writes the last taps-1 Bx values into the state. */
export function shortConvKernel(ctx: GpuContext, a: ShortConvArgs<GpuBuffer>): GpuBuffer {
  const s = a.bcx.view.shape[0];
  const h = a.weight.view.shape[0];
  const taps = a.weight.view.shape[1];
  const out = ctx.alloc(Math.max(4, s * h * 4));
  if (h === 0) return out;
  const key = ['short-conv', a.bcx.dtype, a.weight.dtype, a.bias?.dtype ?? 'no-bias'].join('|');
  const pipeline = ctx.pipeline(key, () =>
    commonWgsl() +
    fillTemplate(wgslSource(import.meta.url, 'short-conv.wgsl'), {
      FUNCTIONS: loadFn('load_in', 'bcx', a.bcx.dtype, 'f32') + loadFn('load_w', 'conv_w', a.weight.dtype, 'f32') + (a.bias ? loadFn('load_b', 'conv_b', a.bias.dtype, 'f32') : ''),
      BIAS_BINDING: a.bias
        ? '@group(0) @binding(5) var<storage, read> conv_b: array<u32>;\nfn bias(c: u32) -> f32 {\n  return load_b(p.b_off + c);\n}'
        : 'fn bias(c: u32) -> f32 {\n  return 0.0;\n}',
      MAX_WINDOW: SHORT_CONV_MAX_WINDOW,
    }),
  );
  const w = a.weight.view;
  const params = uniformWords([s, h, taps, a.bcx.view.offset, w.offset, w.strides[0], w.strides[1], a.state.view.offset, a.bias?.view.offset ?? 0]);
  ctx.dispatch(pipeline, params, [out, a.bcx.handle, a.weight.handle, a.state.handle, ...(a.bias ? [a.bias.handle] : [])], grid1d(h, 64));
  return out;
}
