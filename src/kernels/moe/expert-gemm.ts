// Launcher of the grouped expert GEMM (moe-plan.wgsl, expert-gemm.wgsl, expert-combine.wgsl): expertLinear for
// prefill-sized batches, where the per-slot GEMV (expert-linear.ts) would read an expert's weight once per slot.
// Three dispatches and no read back: the plan sorts the slots by expert into 64-row tiles, the GEMM computes each
// tile against its expert's weight once, and (with combine) a last pass sums each token's slots.
import { batchInvariant } from '../../core/batch-invariance.js';
import { lanesPerWord, type DType } from '../../core/dtype.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import { viaFloat32, type GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import type { ExpertLinearKernelOptions } from './expert-linear.js';
import { INT4_PARAMS, int4Params, tileStoreCode } from '../matmul/gemm.js';
import { moePlanKernel, moePlanLayout, PLAN_MAX_EXPERTS } from './moe-plan.js';
import { defineKernel, type VariantOf } from '../../runtime/webgpu/kernels/kernel.js';

/** Output tile: BM sorted slots x BN columns (BM is also the plan's row tile). */
const BM = 64;
const BN = 64;

/**
 * Slots (T*k) from which expertLinear runs as a grouped GEMM. Below it the GEMV is the better kernel: decode and
 * short prompts (T*k <= 16 at top-8) have about one slot per chosen expert, so sorting saves no weight traffic and
 * a 64-row tile would be mostly padding, while the plan adds a dispatch. From 32 slots an expert's tile serves
 * several slots on average for the expert counts of current MoE models (8-128 experts), and the GEMM's weight reads
 * (one per tile, at most min(T*k, E) + T*k/64 tiles) fall below the GEMV's T*k.
 */
export const GROUPED_MIN_SLOTS = 32;

/** Whether expertLinear takes the grouped GEMM: enough slots, and the plan, grid and scratch fit the device. */
/**
 * The layer's output width n and reduction length k for a weight operand [E, N, K] (packed 4-bit: [E, N, K/8]; its
 * transpose: n = K, k = N).
 */
export function expertLinearDims(weight: GpuOperand, int4: ExpertLinearKernelOptions['int4']): { n: number; k: number } {
  const [, rows, stored] = weight.view.shape;
  if (int4?.transposed) return { n: stored * 8, k: rows };
  return { n: rows, k: int4 ? stored * 8 : stored };
}

export function useGroupedExpertGemm(
  ctx: GpuContext,
  weight: GpuOperand,
  ids: GpuOperand,
  withCombine: boolean,
  int4?: ExpertLinearKernelOptions['int4'],
): boolean {
  const [experts] = weight.view.shape;
  const { n } = expertLinearDims(weight, int4);
  const [t, slots] = ids.view.shape;
  const total = t * slots;
  // Batch-invariant mode keeps the per-slot GEMV for every slot count (core/batch-invariance.ts).
  if (batchInvariant() || total < GROUPED_MIN_SLOTS || n === 0 || experts > PLAN_MAX_EXPERTS) return false;
  const { maxStorageBufferBindingSize: maxBytes, maxComputeWorkgroupsPerDimension: maxGroups } = ctx.limits;
  const layout = moePlanLayout(total, experts, BM);
  if (layout.maxTiles > maxGroups || Math.ceil(n / BN) > maxGroups || layout.words * 4 > maxBytes) return false;
  // The f32 [T*k, N] slot results the combine pass reads (without combine, the output is that size anyway).
  return !withCombine || total * n * 4 <= maxBytes;
}

const EXPERT_GEMM_VARIANT = {
  x: 'dtype',
  w: 'dtype',
  out: 'dtype',
  scaled: 'boolean',
  /** The block scales belong to the weight's transpose (ExpertLinearOptions.scaleTransposed). */
  scaleT: 'boolean',
  /** A packed 4-bit weight: its scales' dtype, else 'none'. */
  int4: 'string',
  /** Multiply by the packed stack's transpose (ExpertLinearOptions int4.transposed). */
  int4T: 'boolean',
  perm: 'boolean',
} as const;

/** WGSL index of W[e]'s (n, k) block scale: [E, n_blocks, k_blocks], or [E, k_blocks, n_blocks] for a transposed stack. */
export function blockScaleIndex(transposed: boolean): string {
  return transposed ? '(e * p.k_blocks + k / 128u) * p.n_blocks + n / 128u' : '(e * p.n_blocks + n / 128u) * p.k_blocks + k / 128u';
}

/** `b_value(base, k, n, e)`: W[e][n, k] dequantized (base: the row's first element, or word when packed 4-bit); `a_col`. */
function expertGemmFunctions(v: VariantOf<typeof EXPERT_GEMM_VARIANT>): string {
  const b = v.int4T
    ? [
        // Element (k, n) of the transpose is stored row k's code n: its word, nibble and group.
        'fn b_value(base: u32, k: u32, n: u32, e: u32) -> f32 {',
        '  let word = code_w(p.w_off + e * p.w_se + k * p.w_sk + n / 8u);',
        '  let g = (e * p.k + k) * p.q_groups + n / p.group;',
        '  return (f32((word >> ((n % 8u) * 4u)) & 15u) - load_q_zero(p.q_z_off + g)) * load_q_scale(p.q_s_off + g);',
        '}',
      ]
    : v.int4 !== 'none'
      ? [
          'fn b_value(base: u32, k: u32, n: u32, e: u32) -> f32 {',
          '  let word = code_w(base + k / 8u);',
          '  let g = (e * p.n + n) * p.q_groups + k / p.group;',
          '  return (f32((word >> ((k % 8u) * 4u)) & 15u) - load_q_zero(p.q_z_off + g)) * load_q_scale(p.q_s_off + g);',
          '}',
        ]
      : [
          'fn b_value(base: u32, k: u32, n: u32, e: u32) -> f32 {',
          // FP8 block scales vary along K: applied per element on load, as gemm.ts's `block` recipe.
          `  return load_w(base + k * p.w_sk)${v.scaled ? ` * scale[${blockScaleIndex(v.scaleT)}]` : ''};`,
          '}',
        ];
  return [...b, `fn a_col(k: u32) -> u32 {\n  return ${v.perm ? 'perm[p.perm_off + k]' : 'k'};\n}\n`].join('\n');
}

const expertGemm = defineKernel({
  name: 'expert-gemm',
  source: 'expert-gemm.wgsl',
  variant: EXPERT_GEMM_VARIANT,
  params: {
    n: 'u32',
    k: 'u32',
    experts: 'u32',
    slots: 'u32',
    x_off: 'u32',
    x_s0: 'u32',
    x_s1: 'u32',
    x_per_slot: 'u32', // x has a row per slot (1) or per token (0)
    w_off: 'u32',
    w_se: 'u32',
    w_sn: 'u32',
    w_sk: 'u32', // weight offset and strides, in elements
    k_blocks: 'u32', // ceil(k / 128)
    n_blocks: 'u32', // ceil(n / 128)
    max_tiles: 'u32',
    ...INT4_PARAMS,
  },
  outputs: { out: { packed: 'out' } },
  inputs: {
    x: { packed: 'x' },
    w: { packed: 'w' },
    plan: 'u32',
    scale: { type: 'f32', when: (v) => v.scaled },
    q_scale: { packed: (v) => v.int4 as DType, when: (v) => v.int4 !== 'none' },
    q_zero: { packed: () => 'uint8' as DType, when: (v) => v.int4 !== 'none' },
    perm: { type: 'u32', when: (v) => v.perm },
  },
  grid: 'custom',
  // 16 x 16 invocations (the body's @workgroup_size), a BM x BN output tile.
  workgroupSize: 256,
  constants: () => ({ BM, BN }),
  functions: expertGemmFunctions,
  code: (v) => ({
    STORE: tileStoreCode(lanesPerWord(v.out), (_col, acc) => acc),
  }),
});

/** The GEMM over a plan's tiles -> contiguous [T*k, N] in outDtype (n a multiple of outDtype's lanes). */
function groupedGemm(
  ctx: GpuContext,
  x: GpuOperand,
  weight: GpuOperand,
  ids: GpuOperand,
  scale: GpuBuffer | undefined,
  scaleTransposed: boolean,
  plan: GpuBuffer,
  maxTiles: number,
  outDtype: DType,
  int4: ExpertLinearKernelOptions['int4'],
): GpuBuffer {
  const [experts, , kStored] = weight.view.shape;
  const transposed = !!int4?.transposed;
  const { n, k } = expertLinearDims(weight, int4);
  const [t, slots] = ids.view.shape;
  const out = ctx.alloc(wordBytes(t * slots * n, lanesPerWord(outDtype)));
  // A dim of size 1 is never stepped along: its stride does not matter.
  const [se, sn, sk] = weight.view.strides.map((s, d) => (weight.view.shape[d] === 1 ? 0 : s));
  expertGemm.run(
    ctx,
    {
      x: x.dtype,
      w: weight.dtype,
      out: outDtype,
      scaled: scale !== undefined,
      scaleT: scale !== undefined && scaleTransposed,
      int4: int4?.scale.dtype ?? 'none',
      int4T: transposed,
      perm: !!int4?.perm && !transposed,
    },
    {
      n,
      k,
      experts,
      slots,
      x_off: x.view.offset,
      x_s0: x.view.strides[0],
      x_s1: x.view.strides[1],
      x_per_slot: x.view.shape[0] === t * slots ? 1 : 0,
      w_off: weight.view.offset,
      w_se: se,
      // The transpose's b_value reads stored row k (stride sn) itself.
      w_sn: transposed ? 0 : sn,
      w_sk: transposed ? sn : sk,
      k_blocks: Math.ceil(k / 128),
      n_blocks: Math.ceil(n / 128),
      max_tiles: maxTiles,
      ...int4Params(int4 ? { int4B: int4 } : {}, transposed ? kStored * 8 : k),
    },
    {
      out,
      x: x.buffer,
      w: weight.buffer,
      plan,
      scale,
      q_scale: int4?.scale.buffer,
      q_zero: int4?.zero.buffer,
      perm: transposed ? undefined : int4?.perm?.buffer,
    },
    { workgroups: [maxTiles, Math.ceil(n / BN), 1] },
  );
  return out;
}

const expertCombine = defineKernel({
  name: 'expert-combine',
  source: 'expert-combine.wgsl',
  variant: { out: 'dtype' },
  params: {
    total: 'u32', // T * N output elements
    n: 'u32',
    slots: 'u32',
    experts: 'u32',
    ids_off: 'u32',
    ids_s0: 'u32',
    ids_s1: 'u32',
    c_off: 'u32',
    c_s0: 'u32',
    c_s1: 'u32',
  },
  outputs: { out: { packed: 'out' } },
  inputs: { slot_out: 'f32', ids: 'u32', comb: 'u32' },
  grid: { words: 'total', element: 'combine_at' },
});

/** out[t, n] = sum_j combine[t, j] * slotOut[t*k + j, n] (in-range ids only) -> contiguous [T, N] in outDtype. */
function combineSlots(ctx: GpuContext, slotOut: GpuBuffer, ids: GpuOperand, combine: GpuOperand, experts: number, n: number, outDtype: DType): GpuBuffer {
  const [t, slots] = ids.view.shape;
  const out = ctx.alloc(wordBytes(t * n, lanesPerWord(outDtype)));
  expertCombine.run(
    ctx,
    { out: outDtype },
    {
      total: t * n,
      n,
      slots,
      experts,
      ids_off: ids.view.offset,
      ids_s0: ids.view.strides[0],
      ids_s1: ids.view.strides[1],
      c_off: combine.view.offset,
      c_s0: combine.view.strides[0],
      c_s1: combine.view.strides[1],
    },
    { out, slot_out: slotOut, ids: ids.buffer, comb: combine.buffer },
  );
  return out;
}

/**
 * expertLinear as a sorted, grouped GEMM (same contract as expertLinearKernel): plan, GEMM into [T*k, N] and, with
 * combine, the weighted sum over each token's slots. Temporaries are released once their readers are queued.
 */
export function expertGemmKernel(ctx: GpuContext, x: GpuOperand, weight: GpuOperand, ids: GpuOperand, options: ExpertLinearKernelOptions): GpuBuffer {
  const { scale, combine, outDtype } = options;
  const [experts] = weight.view.shape;
  const { n } = expertLinearDims(weight, options.int4);
  const [t, slots] = ids.view.shape;
  const lanes = lanesPerWord(outDtype);
  if (!combine && lanes > 1 && n % lanes !== 0) {
    // Rows would share packed output words between workgroups.
    return viaFloat32(ctx, [t * slots, n], outDtype, false, () => expertGemmKernel(ctx, x, weight, ids, { ...options, outDtype: 'float32' }));
  }
  const layout = moePlanLayout(t * slots, experts, BM);
  const plan = moePlanKernel(ctx, ids, experts, layout);
  let slotOut: GpuBuffer;
  try {
    slotOut = groupedGemm(ctx, x, weight, ids, scale, !!options.scaleTransposed, plan, layout.maxTiles, combine ? 'float32' : outDtype, options.int4);
  } finally {
    ctx.release(plan);
  }
  if (!combine) return slotOut;
  try {
    return combineSlots(ctx, slotOut, ids, combine, experts, n, outDtype);
  } finally {
    ctx.release(slotOut);
  }
}
