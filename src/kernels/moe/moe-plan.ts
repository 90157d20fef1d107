// Launcher of the MoE routing plan (moe-plan.wgsl): the slots sorted by expert into BM-row tiles, on the GPU.
import type { GpuBuffer, GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';

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

const moePlan = defineKernel({
  name: 'moe-plan',
  source: 'moe-plan.wgsl',
  variant: { bm: 'number' },
  params: {
    total: 'u32', // T * k slots
    slots: 'u32', // k: ids is [T, k]
    experts: 'u32', // E; buckets = E + 1
    max_tiles: 'u32',
    ids_off: 'u32',
    ids_s0: 'u32',
    ids_s1: 'u32',
  },
  outputs: { plan: 'u32' },
  inputs: { ids: 'u32' },
  grid: 'custom',
  constants: (v) => ({ BM: v.bm, MAX_BUCKETS: PLAN_MAX_EXPERTS + 1 }),
});

/** ids int32 [T, k] (any strides) -> a new plan buffer (see moe-plan.wgsl); one single-workgroup dispatch. */
export function moePlanKernel(ctx: GpuContext, ids: GpuOperand, experts: number, layout: MoePlanLayout): GpuBuffer {
  if (experts > PLAN_MAX_EXPERTS) throw new RangeError(`moe plan: at most ${PLAN_MAX_EXPERTS} experts, got ${experts}`);
  const [t, slots] = ids.view.shape;
  const plan = ctx.alloc(layout.words * 4);
  const [s0, s1] = ids.view.strides;
  moePlan.run(
    ctx,
    { bm: layout.bm },
    { total: t * slots, slots, experts, max_tiles: layout.maxTiles, ids_off: ids.view.offset, ids_s0: s0, ids_s1: s1 },
    { plan, ids: ids.buffer },
    { workgroups: [1, 1, 1] },
  );
  return plan;
}
