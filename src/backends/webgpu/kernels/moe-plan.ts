// Launcher of the MoE routing plan (moe-plan.wgsl): the slots sorted by expert into BM-row tiles, on the GPU.
import type { GpuBuffer, GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';
import { fillTemplate, wgslSource } from './wgsl.js';

/** Experts a plan can sort (one workgroup counter per expert, plus the bucket of out-of-range ids). */
export const PLAN_MAX_EXPERTS = 1024;

/** The plan's layout: used-tile count, tile -> expert, and the padded sorted slot list, in one u32 buffer. */
export interface MoePlanLayout {
  /** Row tile: each expert's segment is padded to a multiple of it. */
  bm: number;
  /** Tiles the sorted list can hold: ceil(T*k / bm) plus one partial tile per non-empty bucket. */
  maxTiles: number;
  /** u32 words of the plan buffer. */
  words: number;
}

export function moePlanLayout(total: number, experts: number, bm: number): MoePlanLayout {
  const maxTiles = Math.ceil(total / bm) + Math.min(experts + 1, total);
  return { bm, maxTiles, words: 1 + maxTiles + maxTiles * bm };
}

/** ids int32 [T, k] (any strides) -> a new plan buffer (see moe-plan.wgsl); one single-workgroup dispatch. */
export function moePlanKernel(ctx: GpuContext, ids: GpuOperand, experts: number, layout: MoePlanLayout): GpuBuffer {
  if (experts > PLAN_MAX_EXPERTS) throw new RangeError(`moe plan: at most ${PLAN_MAX_EXPERTS} experts, got ${experts}`);
  const [t, slots] = ids.view.shape;
  const plan = ctx.alloc(layout.words * 4);
  const pipeline = ctx.pipeline(`moe-plan|${layout.bm}`, () =>
    fillTemplate(wgslSource(import.meta.url, 'moe-plan.wgsl'), { BM: layout.bm, MAX_BUCKETS: PLAN_MAX_EXPERTS + 1 }),
  );
  const [s0, s1] = ids.view.strides;
  const u = new Uint32Array([t * slots, slots, experts, layout.maxTiles, ids.view.offset, s0, s1, 0]);
  ctx.dispatch(pipeline, u.buffer, [plan, ids.buffer], [1, 1, 1]);
  return plan;
}
