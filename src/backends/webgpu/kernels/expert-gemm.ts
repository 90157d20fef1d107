// Launcher of the grouped expert GEMM (moe-plan.wgsl, expert-gemm.wgsl, expert-combine.wgsl): expertLinear for
// prefill-sized batches, where the per-slot GEMV (expert-linear.ts) would read an expert's weight once per slot.
// Three dispatches and no read back: the plan sorts the slots by expert into 64-row tiles, the GEMM computes each
// tile against its expert's weight once, and (with combine) a last pass sums each token's slots.
import { lanesPerWord, type DType } from '../../../core/dtype.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../gpu-context.js';
import { viaFloat32, type GpuOperand } from './elementwise.js';
import type { ExpertLinearKernelOptions } from './expert-linear.js';
import { tileStoreCode } from './gemm.js';
import { moePlanKernel, moePlanLayout, PLAN_MAX_EXPERTS } from './moe-plan.js';
import { commonWgsl, encodeFn, fillTemplate, grid1d, loadFn, wgslSource } from './wgsl.js';

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
export function useGroupedExpertGemm(ctx: GpuContext, weight: GpuOperand, ids: GpuOperand, withCombine: boolean): boolean {
  const [experts, n] = weight.view.shape;
  const [t, slots] = ids.view.shape;
  const total = t * slots;
  if (total < GROUPED_MIN_SLOTS || n === 0 || experts > PLAN_MAX_EXPERTS) return false;
  const { maxStorageBufferBindingSize: maxBytes, maxComputeWorkgroupsPerDimension: maxGroups } = ctx.limits;
  const layout = moePlanLayout(total, experts, BM);
  if (layout.maxTiles > maxGroups || Math.ceil(n / BN) > maxGroups || layout.words * 4 > maxBytes) return false;
  // The f32 [T*k, N] slot results the combine pass reads (without combine, the output is that size anyway).
  return !withCombine || total * n * 4 <= maxBytes;
}

/** The GEMM over a plan's tiles -> contiguous [T*k, N] in outDtype (n a multiple of outDtype's lanes). */
function groupedGemm(ctx: GpuContext, x: GpuOperand, weight: GpuOperand, ids: GpuOperand, scale: GpuBuffer | undefined, plan: GpuBuffer, maxTiles: number, outDtype: DType): GpuBuffer {
  const [experts, n, k] = weight.view.shape;
  const [t, slots] = ids.view.shape;
  const lanes = lanesPerWord(outDtype);
  const out = ctx.alloc(wordBytes(t * slots * n, lanes));
  const scaled = scale !== undefined;
  const key = ['expert-gemm', x.dtype, weight.dtype, outDtype, scaled].join('|');
  const pipeline = ctx.pipeline(key, () =>
    commonWgsl() +
    fillTemplate(wgslSource(import.meta.url, 'expert-gemm.wgsl'), {
      EXTRA_BINDINGS: scaled ? '@group(0) @binding(5) var<storage, read> scale: array<f32>;' : '',
      FUNCTIONS: [loadFn('load_x', 'xin', x.dtype, 'f32'), loadFn('load_w', 'w', weight.dtype, 'f32'), encodeFn('encode_out', outDtype, 'f32')].join('\n'),
      // FP8 block scales vary along K: applied per element on load, as gemm.ts's `block` recipe.
      B_SCALE: scaled ? ' * scale[(e * p.n_blocks + (col0 + r) / 128u) * p.k_blocks + gk / 128u]' : '',
      STORE: tileStoreCode(lanes, (_col, acc) => acc),
    }),
  );
  // A dim of size 1 is never stepped along: its stride does not matter.
  const [se, sn, sk] = weight.view.strides.map((s, d) => (weight.view.shape[d] === 1 ? 0 : s));
  const u = new Uint32Array([
    n, k, experts, slots,
    x.view.offset, x.view.strides[0], x.view.strides[1], x.view.shape[0] === t * slots ? 1 : 0,
    weight.view.offset, se, sn, sk,
    Math.ceil(k / 128), Math.ceil(n / 128), maxTiles, 0,
  ]);
  const buffers = [out, x.buffer, weight.buffer, plan, ...(scale ? [scale] : [])];
  ctx.dispatch(pipeline, u.buffer, buffers, [maxTiles, Math.ceil(n / BN), 1]);
  return out;
}

/** out[t, n] = sum_j combine[t, j] * slotOut[t*k + j, n] (in-range ids only) -> contiguous [T, N] in outDtype. */
function combineSlots(ctx: GpuContext, slotOut: GpuBuffer, ids: GpuOperand, combine: GpuOperand, experts: number, n: number, outDtype: DType): GpuBuffer {
  const [t, slots] = ids.view.shape;
  const lanes = lanesPerWord(outDtype);
  const out = ctx.alloc(wordBytes(t * n, lanes));
  const words = Math.ceil((t * n) / lanes);
  const pipeline = ctx.pipeline(`expert-combine|${outDtype}`, () =>
    commonWgsl() +
    fillTemplate(wgslSource(import.meta.url, 'expert-combine.wgsl'), {
      FUNCTIONS: encodeFn('encode_out', outDtype, 'f32'),
      LANES: lanes,
      BITS: 32 / lanes,
    }),
  );
  const u = new Uint32Array([
    t, n, slots, experts,
    words, ids.view.offset, ids.view.strides[0], ids.view.strides[1],
    combine.view.offset, combine.view.strides[0], combine.view.strides[1], 0,
  ]);
  ctx.dispatch(pipeline, u.buffer, [out, slotOut, ids.buffer, combine.buffer], grid1d(words, 256));
  return out;
}

/**
 * expertLinear as a sorted, grouped GEMM (same contract as expertLinearKernel): plan, GEMM into [T*k, N] and, with
 * combine, the weighted sum over each token's slots. Temporaries are released once their readers are queued.
 */
export function expertGemmKernel(ctx: GpuContext, x: GpuOperand, weight: GpuOperand, ids: GpuOperand, options: ExpertLinearKernelOptions): GpuBuffer {
  const { scale, combine, outDtype } = options;
  const [experts, n] = weight.view.shape;
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
    slotOut = groupedGemm(ctx, x, weight, ids, scale, plan, layout.maxTiles, combine ? 'float32' : outDtype);
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
