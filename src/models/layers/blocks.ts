// Decoder blocks shared by the model families, built from ops only: a projection with its residual in the kernel's
// epilogue, attention with q/k norm + RoPE + the cache write fused, a SwiGLU MLP, and the MoE block in its fused
// form (router + top-k, the chosen experts' gate|up with SwiGLU, down + weighted combine + residual: no read back)
// and as the per-expert loop it is measured against. The loop that runs them is decoder-forward.ts.
import type { Tensor } from '../../core/tensor.js';
import type { Weight } from '../../formats/checkpoint.js';
import { attentionInputs } from '../../ops/attention-inputs.js';
import { add, mul, sigmoid } from '../../ops/elementwise.js';
import { linear, type LinearOptions } from '../../ops/matmul.js';
import { expertLinear, moeRoute, moeRouter, type ExpertLinearOpOptions, type RouteOpOptions } from '../../ops/moe.js';
import { attention, rmsNorm, swiglu } from '../../ops/nn.js';
import { cat, clone, narrow, reshape, select } from '../../ops/shape-ops.js';
import { withTempsAsync } from '../../ops/util.js';
import { tidy } from '../../core/scope.js';
import type { PagedIndex } from '../../ops/paged-cache.js';
import type { AttentionWeights, DenseMlpWeights, MoeWeights } from './weights.js';

/** linear's options for a weight: its FP8 dequantization scale and recipe, when it has them. */
export function weightScaleOptions(w: Weight): { weightScale?: Tensor; recipe?: Weight['recipe']; int4?: LinearOptions['int4'] } {
  if (w.int4) return { weightScale: w.scale, int4: w.int4 };
  return w.scale ? { weightScale: w.scale, recipe: w.recipe } : {};
}

/** x . W^T (+ residual, added in the kernel's epilogue; with swiglu, W is a stacked gate|up). */
export function project(x: Tensor, w: Weight, residual?: Tensor, activation?: 'swiglu'): Tensor {
  return linear(x, w.data, undefined, { ...weightScaleOptions(w), residual, activation });
}

export interface AttentionGeometry {
  readonly heads: number;
  readonly kvHeads: number;
  readonly headDim: number;
  /** The q/k RMSNorm's eps. */
  readonly eps: number;
}

/** One layer's slot in the KV cache and where these tokens go in it. */
export interface AttentionCacheSlot {
  readonly keys: Tensor;
  readonly values: Tensor;
  /** Cache row of the first token. */
  readonly start: number;
  /**
   * int32 [1] device scalar holding `start`: the kernels read the position from it and attend over the whole
   * cache (the causal mask hides rows not yet written), so a captured step replays at any position.
   */
  readonly position?: Tensor;
}

/** The fused q|k|v projection (one GEMV over a stacked weight, or three and a cat). */
function projectQkv(x: Tensor, a: AttentionWeights): Tensor {
  return 'data' in a.qkv ? project(x, a.qkv) : cat([project(x, a.qkv.q), project(x, a.qkv.k), project(x, a.qkv.v)], 1);
}

/** attentionInputs' options for a layer, but for where the rows go. */
function inputOptions(a: AttentionWeights, g: AttentionGeometry, rope: { cos: Tensor; sin: Tensor }) {
  return { heads: g.heads, kvHeads: g.kvHeads, headDim: g.headDim, qNorm: a.qNorm, kNorm: a.kNorm, eps: g.eps, cos: rope.cos, sin: rope.sin };
}

/** h + o(attention(q, k, v)) of the normed x, with q/k norm, RoPE and the cache write fused into one kernel. */
export function attentionBlock(
  x: Tensor,
  h: Tensor,
  a: AttentionWeights,
  g: AttentionGeometry,
  rope: { cos: Tensor; sin: Tensor },
  slot: AttentionCacheSlot,
): Tensor {
  return tidy(() => {
    const s = x.shape[0];
    const qkv = projectQkv(x, a);
    const { keys, values, start, position } = slot;
    const q = attentionInputs(qkv, { ...inputOptions(a, g, rope), keys, values, position: position ?? start });
    const attn = position
      ? attention(q, keys, values, { causal: true, queryOffset: position })
      : attention(q, narrow(keys, 0, 0, start + s), narrow(values, 0, 0, start + s), { causal: true, queryOffset: start });
    return project(reshape(attn, [s, g.heads * g.headDim]), a.o, h);
  });
}

/**
 * attentionBlock over a paged KV pool for a batch of sequences (their rows consecutive in x and h, each row's
 * position and pages in the batch index): every step of it, projections, the cache writes and attention, is one
 * dispatch for the whole batch.
 */
export function pagedAttentionBlock(
  x: Tensor,
  h: Tensor,
  a: AttentionWeights,
  g: AttentionGeometry,
  rope: { cos: Tensor; sin: Tensor },
  pool: { keys: Tensor; values: Tensor },
  pages: PagedIndex,
): Tensor {
  return tidy(() => {
    const { keys, values } = pool;
    const q = attentionInputs(projectQkv(x, a), { ...inputOptions(a, g, rope), keys, values, position: 0, pages });
    const attn = attention(q, keys, values, { pages });
    return project(reshape(attn, [x.shape[0], g.heads * g.headDim]), a.o, h);
  });
}

/** residual + down(silu(gate x) * up x): two dispatches on the decode path (SwiGLU in the gate|up GEMV). */
export function denseMlp(x: Tensor, mlp: DenseMlpWeights, residual?: Tensor): Tensor {
  return project(project(x, mlp.gateUp, undefined, 'swiglu'), mlp.down, residual);
}

/** How a model family routes: top-k and the RouteOpOptions (scoring, normalization, scale) of its router. */
export interface Routing extends Omit<RouteOpOptions, 'selectionBias'> {
  readonly topK: number;
}

/** The router GEMV and top-k in one kernel, or (unfused, or an FP8 router) a linear then the top-k. */
function route(x: Tensor, mlp: MoeWeights, routing: Routing, fused = true): { ids: Tensor; weights: Tensor } {
  const { topK, ...options } = routing;
  const o = { ...options, selectionBias: mlp.selectionBias };
  // The router stays in high precision (official FP8 checkpoints keep it so); an FP8 one goes through linear.
  return fused && !mlp.router.scale ? moeRouter(x, mlp.router.data, topK, o) : moeRoute(project(x, mlp.router), topK, o);
}

/** sigmoid(gate . x) * shared(x): a shared expert that runs beside the fused block. */
function sharedExpert(x: Tensor, shared: NonNullable<MoeWeights['shared']>): Tensor {
  return mul(sigmoid(project(x, shared.gate)), denseMlp(x, shared.mlp));
}

/** expertLinear's options for a stacked expert weight: FP8 block scales, or 4-bit group scales and zero points. */
export function expertWeightOptions(w: Weight): { scale?: Tensor; int4?: ExpertLinearOpOptions['int4'] } {
  return { scale: w.scale, ...(w.int4 ? { int4: w.int4 } : {}) };
}

/**
 * residual + MoE(x) in three dispatches, the expert ids never leaving the device (a shared expert stacked as expert
 * E rides along as one more slot; one kept apart adds its own dispatches). FP8 and packed 4-bit experts are
 * dequantized in the expert kernels, so a decode step reads only the chosen experts' bytes.
 */
export function fusedMoe(x: Tensor, mlp: MoeWeights, routing: Routing, residual: Tensor): Tensor {
  if (mlp.shared) residual = add(residual, sharedExpert(x, mlp.shared));
  const { ids, weights } = route(x, mlp, routing);
  const act = expertLinear(x, mlp.gateUp.data, ids, { ...expertWeightOptions(mlp.gateUp), activation: 'swiglu' });
  return expertLinear(act, mlp.down.data, ids, { ...expertWeightOptions(mlp.down), combine: weights, residual });
}

/** Expert e of a stacked [E, ...] weight (its scales and 4-bit zero points too; a shared permutation stays whole). */
export function expertWeight(w: Weight, e: number, keep: (t: Tensor) => Tensor = (t) => t): Weight {
  const q = w.int4;
  return {
    data: keep(select(w.data, 0, e)),
    scale: w.scale && keep(select(w.scale, 0, e)),
    recipe: w.recipe,
    ...(q ? { int4: { groupSize: q.groupSize, zero: keep(select(q.zero, 0, e)), ...(q.perm ? { perm: q.perm } : {}) } } : {}),
  };
}

/**
 * MoE(x) the way eager frameworks run it, the baseline the fused block is measured against: read the routing
 * back, then one gate|up, SwiGLU, down and scaled add per selected expert and token.
 */
export async function perExpertMoe(x: Tensor, mlp: MoeWeights, routing: Routing): Promise<Tensor> {
  return withTempsAsync(async (keep) => {
    const r = tidy(() => route(x, mlp, routing, false)); // the router logits go, ids and weights stay
    keep(r.ids);
    keep(r.weights);
    const ids = await r.ids.toArray();
    const weights = await r.weights.toArray();
    const k = routing.topK + (routing.sharedExpert ? 1 : 0); // the shared expert stacked as expert E is one more slot
    const rows: Tensor[] = [];
    for (let t = 0; t < x.shape[0]; t++) {
      const xt = keep(narrow(x, 0, t, 1));
      let acc: Tensor | undefined;
      for (let j = 0; j < k; j++) {
        const e = ids[t * k + j];
        const expert = (w: Weight): Weight => expertWeight(w, e, keep);
        const y = keep(project(keep(swiglu(keep(project(xt, expert(mlp.gateUp))))), expert(mlp.down)));
        const scaled = keep(mul(y, weights[t * k + j]));
        acc = acc ? keep(add(acc, scaled)) : scaled;
      }
      rows.push(acc!);
    }
    const routed = rows.length === 1 ? clone(rows[0]) : cat(rows, 0);
    const shared = mlp.shared;
    return shared ? add(keep(routed), keep(tidy(() => sharedExpert(x, shared)))) : routed;
  });
}

/** The final norm, then the lm_head over the last position (lastOnly) or all of them. */
export function lmHead(h: Tensor, norm: Tensor, eps: number, head: Weight, lastOnly: boolean): Tensor {
  const s = h.shape[0];
  const last = lastOnly && s > 1 ? narrow(h, 0, s - 1, 1) : h;
  return project(rmsNorm(last, norm, eps), head);
}
