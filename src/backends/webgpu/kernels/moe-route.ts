// Launcher of the MoE router top-k (moe-route.wgsl): one dispatch, one workgroup per token row.
import type { RouteOptions } from '../../backend.js';
import type { GpuBuffer, GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';
import { pow2AtLeast } from './nn-util.js';
import { commonWgsl, fillTemplate, grid1d, loadFn, wgslSource } from './wgsl.js';

/** RouteOptions with the selection bias as a kernel operand. */
export type GpuRouteOptions = Omit<RouteOptions<GpuBuffer>, 'selectionBias'> & { selectionBias?: GpuOperand };

/** Experts the fused router holds logits for in workgroup memory. */
export const FUSED_ROUTER_MAX_EXPERTS = 1024;

const PLAIN_LOGIT = 'fn logit(base: u32, i: u32) -> f32 {\n  return load0(base + i * p.s_e);\n}\n';

const ROUTER_PROLOGUE = `  if (live) {
    let xrow = p.x_off + row * p.x_s0;
    for (var i = lid.x; i < p.e; i += WG) {
      let wrow = p.w_off + i * p.w_s0;
      var acc = 0.0;
      for (var k = 0u; k < p.h; k++) {
        acc += load0(xrow + k * p.x_s1) * load_w(wrow + k * p.w_s1);
      }
      sh_logits[i] = acc;
    }
  }
  workgroupBarrier();`;

/**
 * logits [T, E] (any strides) -> [ids int32 [T, topK], weights float32 [T, topK]], both contiguous. With `router`
 * (weight [E, H], float dtypes, E <= FUSED_ROUTER_MAX_EXPERTS), `logits` is the hidden state x [T, H] and the
 * logits x . W^T are computed in the same dispatch. The selection bias is a contiguous float32 [E].
 */
export function moeRouteKernel(ctx: GpuContext, logits: GpuOperand, topK: number, options: GpuRouteOptions, router?: GpuOperand): [GpuBuffer, GpuBuffer] {
  const t = logits.view.shape[0];
  const e = router ? router.view.shape[0] : logits.view.shape[1];
  const ids = ctx.alloc(Math.max(4, t * topK * 4));
  const weights = ctx.alloc(Math.max(4, t * topK * 4));
  if (t * topK === 0) return [ids, weights];
  const logitSlots = Math.max(64, pow2AtLeast(e));
  const bias = options.selectionBias;
  const biasBinding = router ? 5 : 4;
  const key = ['moe-route', logits.dtype, router ? `router-${router.dtype}-${logitSlots}` : 'logits', bias ? 'bias' : ''].join('|');
  const pipeline = ctx.pipeline(key, () =>
    commonWgsl() +
    fillTemplate(wgslSource(import.meta.url, 'moe-route.wgsl'), {
      FUNCTIONS:
        loadFn('load0', 'in0', logits.dtype, 'f32') +
        (router
          ? loadFn('load_w', 'router_w', router.dtype, 'f32') +
            `var<workgroup> sh_logits: array<f32, ${logitSlots}>;\nfn logit(base: u32, i: u32) -> f32 {\n  return sh_logits[i];\n}\n`
          : PLAIN_LOGIT),
      ROUTER_BINDING: router ? '@group(0) @binding(4) var<storage, read> router_w: array<u32>;' : '',
      LOGITS_PROLOGUE: router ? ROUTER_PROLOGUE : '',
      BIAS_BINDING: bias
        ? `@group(0) @binding(${biasBinding}) var<storage, read> selection_bias: array<f32>;\nfn bias(i: u32) -> f32 {\n  return selection_bias[p.bias_off + i];\n}`
        : 'fn bias(i: u32) -> f32 {\n  return 0.0;\n}',
    }),
  );
  const [s0, s1] = logits.view.strides;
  const head = [t, e, topK, options.normalize ? 1 : 0];
  const views = router ? [0, 0, 0, logits.view.shape[1], logits.view.offset, s0, s1, router.view.offset, ...router.view.strides] : [logits.view.offset, s0, s1, 0, 0, 0, 0, 0, 0, 0];
  const u = new Uint32Array(20);
  u.set([...head, ...views, options.scoring === 'sigmoid' ? 1 : 0, 0, 0, bias?.view.offset ?? 0]);
  const f = new Float32Array(u.buffer);
  f[15] = options.normalizeEps;
  f[16] = options.scale;
  const buffers = [ids, weights, logits.buffer, ...(router ? [router.buffer] : []), ...(bias ? [bias.buffer] : [])];
  ctx.dispatch(pipeline, u.buffer, buffers, grid1d(t, 1));
  return [ids, weights];
}
