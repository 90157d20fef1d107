// Launcher of the MoE router top-k (moe-route.wgsl): one dispatch, one workgroup per token row.
import type { DType } from '../../core/dtype.js';
import { numel } from '../../core/shape.js';
import type { RouteOptions } from '../../runtime/backend.js';
import type { GpuBuffer, GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { bytesOf, defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { pow2AtLeast } from '../../runtime/webgpu/kernels/nn-util.js';
import { grid1d, workgroupReduce } from '../../runtime/webgpu/kernels/wgsl.js';

/** RouteOptions with the selection bias as a kernel operand. */
export type GpuRouteOptions = Omit<RouteOptions<GpuBuffer>, 'selectionBias'> & { selectionBias?: GpuOperand };

/** Logits (router rows, a shared expert's gate included) the fused router holds in workgroup memory. */
export const FUSED_ROUTER_MAX_EXPERTS = 1024;

const NO_ROUTER = 'none';

const ROUTER_PROLOGUE = `  if (live) {
    let xrow = p.x_off + row * p.x_s0;
    for (var i = lid.x; i < p.e + p.shared_gate; i += WG) {
      let wrow = p.w_off + i * p.w_s0;
      var acc = 0.0;
      for (var k = 0u; k < p.h; k++) {
        acc += load_x(xrow + k * p.x_s1) * load_router_w(wrow + k * p.w_s1);
      }
      sh_logits[i] = acc;
    }
  }
  workgroupBarrier();`;

/** The expert's logit: read from the row, or from workgroup memory where the fused router wrote it. */
function logitFn(router: boolean, slots: number): string {
  if (!router) return 'fn logit(base: u32, i: u32) -> f32 {\n  return load_x(base + i * p.s_e);\n}\n';
  return `var<workgroup> sh_logits: array<f32, ${slots}>;\nfn logit(base: u32, i: u32) -> f32 {\n  return sh_logits[i];\n}\n`;
}

/** The row's max (with a NaN flag), its sum of exp, and each round's best candidate (a round per top-k slot, refilling its scratch). */
const reductions = () =>
  workgroupReduce({ name: 'reduce_row_max', type: 'RowMax', combine: 'RowMax(max(a.m, b.m), a.nan | b.nan)', result: 'reusable' }) +
  workgroupReduce({ name: 'reduce_sum', type: 'f32', combine: 'a + b', result: 'reusable' }) +
  workgroupReduce({ name: 'reduce_pick', type: 'Pick', combine: 'first_pick(a, b)', result: 'reusable' });

const moeRoute = defineKernel({
  name: 'moe-route',
  source: 'moe-route.wgsl',
  // router: the fused router weight's dtype or NO_ROUTER; slots: its logits' workgroup array (0 without it).
  variant: { dtype: 'dtype', router: 'string', slots: 'number', bias: 'boolean' },
  params: {
    rows: 'u32',
    e: 'u32',
    top_k: 'u32',
    normalize: 'u32',
    off: 'u32',
    s_row: 'u32',
    s_e: 'u32',
    h: 'u32', // with the router fused: x [T, h] . W [E, h]^T gives the logits (x_* and w_* are their views)
    x_off: 'u32',
    x_s0: 'u32',
    x_s1: 'u32',
    w_off: 'u32',
    w_s0: 'u32',
    w_s1: 'u32',
    sigmoid: 'u32', // score = sigmoid(logit) instead of the row's softmax
    shared_gate: 'u32', // 1: logit e is a shared expert's gate, written as slot top_k (id e, weight sigmoid(logit))
    eps: 'f32',
    scale: 'f32',
    bias_off: 'u32',
  },
  outputs: { ids: 'u32', weights: 'f32' },
  // x: the logits, or with the router fused the hidden state.
  inputs: {
    x: { packed: 'dtype' },
    router_w: { packed: (v) => v.router as DType, when: (v) => v.router !== NO_ROUTER },
    selection_bias: { type: 'f32', when: (v) => v.bias },
  },
  grid: 'custom',
  workgroupSize: 64,
  functions: (v) =>
    logitFn(v.router !== NO_ROUTER, v.slots) +
    (v.bias ? 'fn bias(i: u32) -> f32 {\n  return selection_bias[p.bias_off + i];\n}\n' : 'fn bias(i: u32) -> f32 {\n  return 0.0;\n}\n') +
    reductions(),
  code: (v) => ({ LOGITS_PROLOGUE: v.router !== NO_ROUTER ? ROUTER_PROLOGUE : '' }),
});

/**
 * logits [T, E] (any strides) -> [ids int32 [T, topK], weights float32 [T, topK]], both contiguous. With `router`
 * (weight [E, H], float dtypes, E <= FUSED_ROUTER_MAX_EXPERTS), `logits` is the hidden state x [T, H] and the
 * logits x . W^T are computed in the same dispatch. The selection bias is a contiguous float32 [E]. With
 * options.sharedExpert the logits (router rows) are E+1, all held in workgroup memory, and the outputs [T, topK+1].
 */
export function moeRouteKernel(ctx: GpuContext, logits: GpuOperand, topK: number, options: GpuRouteOptions, router?: GpuOperand): [GpuBuffer, GpuBuffer] {
  const t = logits.view.shape[0];
  const columns = router ? router.view.shape[0] : logits.view.shape[1]; // E, or E+1 with the shared expert's gate
  const shared = options.sharedExpert ? 1 : 0;
  const e = columns - shared;
  const slots = topK + shared;
  const ids = ctx.alloc(Math.max(4, t * slots * 4));
  const weights = ctx.alloc(Math.max(4, t * slots * 4));
  if (t * slots === 0) return [ids, weights];
  const bias = options.selectionBias;
  const [s0, s1] = logits.view.strides;
  const views = router
    ? {
        off: 0,
        s_row: 0,
        s_e: 0,
        h: logits.view.shape[1],
        x_off: logits.view.offset,
        x_s0: s0,
        x_s1: s1,
        w_off: router.view.offset,
        w_s0: router.view.strides[0],
        w_s1: router.view.strides[1],
      }
    : { off: logits.view.offset, s_row: s0, s_e: s1, h: 0, x_off: 0, x_s0: 0, x_s1: 0, w_off: 0, w_s0: 0, w_s1: 0 };
  moeRoute.run(
    ctx,
    { dtype: logits.dtype, router: router?.dtype ?? NO_ROUTER, slots: router ? Math.max(64, pow2AtLeast(columns)) : 0, bias: bias !== undefined },
    {
      rows: t,
      e,
      top_k: topK,
      normalize: options.normalize ? 1 : 0,
      ...views,
      sigmoid: options.scoring === 'sigmoid' ? 1 : 0,
      shared_gate: shared,
      eps: options.normalizeEps,
      scale: options.scale,
      bias_off: bias?.view.offset ?? 0,
    },
    { ids, weights, x: logits.buffer, router_w: router?.buffer, selection_bias: bias?.buffer },
    {
      workgroups: grid1d(t, 1),
      bytes: bytesOf(logits.dtype, numel(logits.view.shape)) + (router ? bytesOf(router.dtype, numel(router.view.shape)) : 0) + 8 * t * slots,
    },
  );
  return [ids, weights];
}
