// Launcher of the MoE router top-k (moe-route.wgsl): one dispatch, one workgroup per token row.
import type { GpuBuffer, GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';
import { commonWgsl, fillTemplate, grid1d, loadFn, wgslSource } from './wgsl.js';

/** logits [T, E] (any strides) -> [ids int32 [T, topK], weights float32 [T, topK]], both contiguous. */
export function moeRouteKernel(ctx: GpuContext, logits: GpuOperand, topK: number, normalize: boolean): [GpuBuffer, GpuBuffer] {
  const [t, e] = logits.view.shape;
  const ids = ctx.alloc(Math.max(4, t * topK * 4));
  const weights = ctx.alloc(Math.max(4, t * topK * 4));
  if (t * topK === 0) return [ids, weights];
  const pipeline = ctx.pipeline(`moe-route|${logits.dtype}`, () =>
    commonWgsl() + fillTemplate(wgslSource(import.meta.url, 'moe-route.wgsl'), { FUNCTIONS: loadFn('load0', 'in0', logits.dtype, 'f32') }),
  );
  const [sRow, sE] = logits.view.strides;
  const u = new Uint32Array([t, e, topK, normalize ? 1 : 0, logits.view.offset, sRow, sE, 0]);
  ctx.dispatch(pipeline, u.buffer, [ids, weights, logits.buffer], grid1d(t, 1));
  return [ids, weights];
}
