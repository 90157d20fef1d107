// Launcher of the MoE expert weight gradient (expert-weight-grad.wgsl): the gradient of a stacked expert weight
// [E, N, K] in one dispatch per weight, whatever the number of experts, the slots grouped by expert with the routing
// plan of the grouped expert GEMM (moe-plan.wgsl), built once for every weight of a block. No read back.
import type { GpuBuffer, GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { bytesOf, defineKernel, type VariantOf } from '../../runtime/webgpu/kernels/kernel.js';
import { moePlanKernel, moePlanLayout } from './moe-plan.js';

/** The plan's row tile (expert-gemm.ts's BM: its pipeline is shared) and the output tile of a workgroup. */
const BM = 64;
const BN = 64;
const BK = 64;

const VARIANT = { g: 'dtype', x: 'dtype', combine: 'boolean' } as const;

function weightFn(v: VariantOf<typeof VARIANT>): string {
  const body = v.combine ? 'bitcast<f32>(comb[p.c_off + token * p.c_s0 + j * p.c_s1])' : '1.0';
  return `fn slot_weight(token: u32, j: u32) -> f32 {\n  return ${body};\n}\n`;
}

const expertWeightGrad = defineKernel({
  name: 'expert-weight-grad',
  source: 'expert-weight-grad.wgsl',
  variant: VARIANT,
  params: {
    n: 'u32',
    k: 'u32',
    slots: 'u32', // k of the top-k: ids is [T, slots]
    max_tiles: 'u32',
    g_off: 'u32',
    g_s0: 'u32',
    g_s1: 'u32',
    g_per_slot: 'u32', // g has a row per slot (1) or per token (0)
    x_off: 'u32',
    x_s0: 'u32',
    x_s1: 'u32',
    x_per_slot: 'u32',
    c_off: 'u32',
    c_s0: 'u32',
    c_s1: 'u32',
  },
  outputs: { out: 'f32' },
  inputs: {
    g: { packed: 'g' },
    x: { packed: 'x' },
    plan: 'u32',
    comb: { type: 'u32', when: (v) => v.combine },
  },
  grid: 'custom',
  // 16 x 16 invocations (the body's @workgroup_size), a BN x BK tile of one expert's gradient.
  workgroupSize: 256,
  constants: () => ({ BM, BN, BK }),
  functions: weightFn,
});

/** One weight's product: g [T or T*k, N] (the output's gradient) and x [T or T*k, K] (the layer's input). */
export interface ExpertWeightGradTerm {
  readonly g: GpuOperand;
  readonly x: GpuOperand;
}

/**
 * grad[e] = sum over slots s with ids[s] = e of combine[s] * g_row(s)^T outer x_row(s) for each term -> contiguous
 * float32 [E, N, K] per term. ids int32 [T, k] (any strides); combine float32 [T, k] or none (1). Slots whose id is
 * outside 0..E-1 add nothing. One plan dispatch, then one per term.
 */
export function expertWeightGradKernel(
  ctx: GpuContext,
  ids: GpuOperand,
  experts: number,
  terms: readonly ExpertWeightGradTerm[],
  combine?: GpuOperand,
): GpuBuffer[] {
  const [t, slots] = ids.view.shape;
  const layout = moePlanLayout(t * slots, experts, BM);
  const plan = moePlanKernel(ctx, ids, experts, layout);
  try {
    return terms.map(({ g, x }) => {
      const n = g.view.shape[1];
      const k = x.view.shape[1];
      const out = ctx.alloc(Math.max(4, experts * n * k * 4));
      if (experts * n * k === 0) return out;
      expertWeightGrad.run(
        ctx,
        { g: g.dtype, x: x.dtype, combine: combine !== undefined },
        {
          n,
          k,
          slots,
          max_tiles: layout.maxTiles,
          g_off: g.view.offset,
          g_s0: g.view.strides[0],
          g_s1: g.view.strides[1],
          g_per_slot: g.view.shape[0] === t * slots ? 1 : 0,
          x_off: x.view.offset,
          x_s0: x.view.strides[0],
          x_s1: x.view.strides[1],
          x_per_slot: x.view.shape[0] === t * slots ? 1 : 0,
          c_off: combine?.view.offset ?? 0,
          c_s0: combine?.view.strides[0] ?? 0,
          c_s1: combine?.view.strides[1] ?? 0,
        },
        { out, g: g.buffer, x: x.buffer, plan, comb: combine?.buffer },
        {
          workgroups: [Math.ceil(k / BK), Math.ceil(n / BN), experts],
          bytes: bytesOf(g.dtype, g.view.shape[0] * n) + bytesOf(x.dtype, x.view.shape[0] * k) + experts * n * k * 4,
        },
      );
      return out;
    });
  } finally {
    ctx.release(plan);
  }
}
