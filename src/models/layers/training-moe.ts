// The MoE feed-forward for training, differentiable in the router scores and every expert (its stacked weights in
// full fine-tuning, or through the LoRA sites).
import type { Tensor } from '../../core/tensor.js';
import type { Weight } from '../../formats/checkpoint.js';
import { noGrad } from '../../autograd/grad-mode.js';
import { float32 } from '../../ops/grad-rules.js';
import { tidy } from '../../core/scope.js';
import { tensor, zeros } from '../../ops/creation.js';
import { linear } from '../../ops/matmul.js';
import { arange } from '../../ops/creation.js';
import { expertLinear, moeExperts, moeRoute } from '../../ops/moe.js';
import { swiglu } from '../../ops/nn.js';
import { cat, select } from '../../ops/shape-ops.js';
import { softmax } from '../../ops/softmax.js';
import { expertWeight, expertWeightOptions, weightScaleOptions, type Routing } from './blocks.js';
import { withDeltas, type ProjectionDelta, type ProjectionSite } from './projection-site.js';
import type { ExpertSites, MoeTrainingFeedForward, SharedExpertSites } from './training-blocks.js';
import type { MoeWeights } from './weights.js';

export interface TrainingMoeOptions {
  /** Run each chosen expert on its tokens with per-expert ops even where the grouped experts apply (tests compare). */
  readonly composed?: boolean;
}

/**
 * An adapter's delta that can say which sites it adapts (LoraAdapter's does): a site it does not cover adds nothing.
 * A delta without `covers` may adapt any site.
 */
export type SiteAwareDelta = ProjectionDelta & {
  readonly covers?: (site: ProjectionSite) => boolean;
  /**
   * The adapters of `sites` (one projection of experts 0..E-1) as stacked trainable tensors A [E, r, in] and
   * B [E, out, r] with their scaling, where the adapter keeps them so: the grouped experts then run them.
   */
  readonly expertStack?: (sites: readonly ProjectionSite[]) => ExpertAdapterStack | undefined;
};

/** One projection's adapters of every routed expert, stacked: delta = scaling * (x A[e]^T) B[e]^T. */
export interface ExpertAdapterStack {
  readonly a: Tensor;
  readonly b: Tensor;
  readonly scaling: number;
}

/** The routed experts' adapters of each projection, stacked (undefined: that projection has none). */
interface ExpertAdapters {
  readonly gate?: ExpertAdapterStack;
  readonly up?: ExpertAdapterStack;
  readonly down?: ExpertAdapterStack;
}

const PROJECTIONS = ['gate', 'up', 'down'] as const;

/**
 * The adapters on the routed experts' projections as stacks, {} when no adapter touches them, or undefined when
 * some do but not as stacks over every expert (the per-expert form runs them then).
 */
function expertAdapters(ff: MoeTrainingFeedForward, delta: SiteAwareDelta | undefined): ExpertAdapters | undefined {
  if (!delta) return {};
  const covers = delta.covers;
  if (!covers) return undefined;
  const out: Record<string, ExpertAdapterStack> = {};
  for (const p of PROJECTIONS) {
    const sites = ff.experts.map((e) => e[p]);
    const covered = sites.filter((s) => covers(s)).length;
    if (covered === 0) continue;
    const stack = covered === sites.length ? delta.expertStack?.(sites) : undefined;
    if (!stack) return undefined;
    out[p] = stack;
  }
  // The stacked gate|up rows: each expert's gate rows, then its up rows.
  const [first] = ff.experts;
  if ((out.gate || out.up) && (first.gate.rowOffset !== 0 || first.up.rowOffset !== first.gate.outFeatures)) return undefined;
  return out;
}

/**
 * The routed experts' adapters when the grouped expert ops (a few dispatches per layer) can run the experts, else
 * undefined: their weights are float weights (frozen, or trained in full: moeExperts gives the stacks' gradients)
 * or frozen FP8 / packed 4-bit stacks, an adapter on expert projections keeps them stacked (expertAdapters), and a
 * shared expert is either stacked as the last expert (its gate the router's last row) or beside them.
 */
function groupedExperts(ff: MoeTrainingFeedForward, delta: SiteAwareDelta | undefined): ExpertAdapters | undefined {
  const shared = ff.shared;
  if (shared?.expert !== undefined && shared.expert !== ff.experts.length) return undefined;
  return expertAdapters(ff, delta);
}

/**
 * residual + the routed experts from differentiable expertLinears (with adapters on their projections, or over FP8
 * or packed 4-bit stacks, which moeExperts does not take): each projection's base (dequantized in the kernel) and LoRA terms
 * (x A[e]^T then . B[e]^T, scaled) for every slot at once, swiglu, then each token's slots summed with their routing
 * weights. A few dispatches per projection whatever the number of experts; the stacks' gradients come from
 * expertWeightGrad, x's through the transposed stacks.
 */
function adaptedExperts(x: Tensor, residual: Tensor, mlp: MoeWeights, ids: Tensor, weights: Tensor, lora: ExpertAdapters): Tensor {
  const [t, k] = ids.shape;
  const xf = float32(x);
  const term = (input: Tensor, s: ExpertAdapterStack) => expertLinear(expertLinear(input, s.a, ids), s.b, ids).mul(s.scaling);
  let pre = expertLinear(x, mlp.gateUp.data, ids, expertWeightOptions(mlp.gateUp));
  if (lora.gate || lora.up) {
    const half = pre.shape[1] / 2;
    const none = () => zeros([t * k, half], { device: x.device });
    pre = pre.add(cat([lora.gate ? term(xf, lora.gate) : none(), lora.up ? term(xf, lora.up) : none()], 1));
  }
  const act = swiglu(pre);
  let y = expertLinear(act, mlp.down.data, ids, expertWeightOptions(mlp.down));
  if (lora.down) y = y.add(term(float32(act), lora.down));
  const combined = y.reshape([t, k, y.shape[1]]).mul(weights.unsqueeze(-1)).sum(1);
  return residual.add(combined.dtype === residual.dtype ? combined : combined.to(residual.dtype));
}

/** Whether an adapter touches a shared expert's projections (it then runs as a dense MLP with the deltas). */
function adapted(sites: ExpertSites, delta: SiteAwareDelta | undefined): boolean {
  return delta !== undefined && [sites.gate, sites.up, sites.down].some((s) => delta.covers!(s));
}

/**
 * trainingMoe with every routed expert in the grouped ops: the top-k ids stay on the device (no read back), the
 * chosen experts' routing weights come from the differentiable scores through a one-hot of the ids, and moeExperts
 * runs all experts' forward and backward in a few dispatches. A stacked shared expert is one more slot (id E,
 * weight sigmoid of its gate's logit); one beside the experts runs as a dense MLP.
 */
function groupedTrainingMoe(
  x: Tensor,
  residual: Tensor,
  ff: MoeTrainingFeedForward,
  routing: Routing,
  delta: SiteAwareDelta | undefined,
  lora: ExpertAdapters,
): Tensor {
  const mlp = ff.weights;
  const { topK, scoring, normalize, normalizeEps, scale } = routing;
  const experts = ff.experts.length;
  const shared = ff.shared;
  // moeExperts takes float stacks without adapters; else the block is composed from expertLinears.
  const composedExperts =
    lora.gate !== undefined || lora.up !== undefined || lora.down !== undefined || mlp.gateUp.scale !== undefined || mlp.down.scale !== undefined;
  // A stacked shared expert no adapter touches is one more slot of every token (id E) of moeExperts; else (or when
  // the block is composed) it runs beside.
  const sharedSlot = shared?.expert !== undefined && !adapted(shared, delta) && !composedExperts;
  return tidy(() => {
    const all = linear(x, mlp.router.data, undefined, weightScaleOptions(mlp.router));
    const logits = all.shape[1] > experts ? all.narrow(1, 0, experts) : all;
    const s = logits.shape[0];
    const ids = noGrad(() => {
      const route = moeRoute(sharedSlot ? all : logits, topK, {
        scoring,
        normalize,
        normalizeEps,
        scale,
        selectionBias: mlp.selectionBias,
        sharedExpert: sharedSlot,
      });
      route.weights.dispose();
      return route.ids;
    });
    const routed = sharedSlot ? ids.narrow(1, 0, topK) : ids;
    // An upload of E ids per layer: the one constant the block makes (a cached one would outlive the model).
    const oneHot = noGrad(() =>
      routed
        .unsqueeze(-1)
        .eq(arange(experts, undefined, 1, { dtype: 'int32', device: x.device }))
        .to('float32'),
    );
    const scores = scoring === 'sigmoid' ? float32(logits).sigmoid() : softmax(float32(logits), -1);
    // [T, k, E] . [T, E, 1]: each slot's score, differentiable in the scores.
    let weights = oneHot.matmul(scores.unsqueeze(-1)).reshape([s, topK]);
    if (normalize) weights = weights.div(weights.sum(-1, { keepdim: true }).add(normalizeEps ?? 0));
    if (scale !== undefined && scale !== 1) weights = weights.mul(scale);
    if (sharedSlot) weights = cat([weights, float32(all.narrow(1, experts, 1)).sigmoid()], 1);
    let out = composedExperts
      ? adaptedExperts(x, residual, mlp, ids, weights, lora)
      : moeExperts(x, mlp.gateUp.data, mlp.down.data, ids, weights, { residual });
    if (shared && !sharedSlot) out = out.add(sharedExpertOutput(x, all, mlp, shared, delta));
    return out;
  });
}

/** A shared expert as a dense SwiGLU MLP with the adapter's deltas, scaled by sigmoid of its gate's logit. */
function sharedExpertOutput(x: Tensor, all: Tensor, mlp: MoeWeights, shared: SharedExpertSites, delta: ProjectionDelta | undefined): Tensor {
  const e = shared.expert;
  const pick = (w: Weight): Weight => (e === undefined ? w : { data: select(w.data, 0, e), scale: w.scale && select(w.scale, 0, e), recipe: w.recipe });
  const [gateUp, down] = e === undefined ? [mlp.shared!.mlp.gateUp, mlp.shared!.mlp.down] : [pick(mlp.gateUp), pick(mlp.down)];
  const gateLogit = e === undefined ? linear(x, mlp.shared!.gate.data, undefined, weightScaleOptions(mlp.shared!.gate)) : all.narrow(1, e, 1);
  const act = swiglu(withDeltas(linear(x, gateUp.data, undefined, weightScaleOptions(gateUp)), x, [shared.gate, shared.up], delta));
  const y = withDeltas(linear(act, down.data, undefined, weightScaleOptions(down)), act, [shared.down], delta);
  return y.mul(float32(gateLogit).sigmoid());
}

/**
 * residual + MoE(x), as transformers' sparse MoE blocks compute it in training: the router's top-k chosen on the
 * device (read back once per layer), each chosen expert run on its tokens (gathered and scattered by one-hot
 * matmuls), weighted by the differentiable router scores of the chosen experts (renormalized, scaled); a shared
 * expert runs on every token, scaled by sigmoid of its gate's logit (the router's last row when it is stacked).
 */
export function trainingMoe(
  x: Tensor,
  residual: Tensor,
  ff: MoeTrainingFeedForward,
  routing: Routing,
  delta?: ProjectionDelta,
  options: TrainingMoeOptions = {},
): Tensor | Promise<Tensor> {
  // The grouped form never reads back, so it stays synchronous (a compiled training step can trace it).
  const lora = options.composed ? undefined : groupedExperts(ff, delta);
  if (lora) return groupedTrainingMoe(x, residual, ff, routing, delta, lora);
  return perExpertTrainingMoe(x, residual, ff, routing, delta);
}

/**
 * trainingMoe's per-expert form (adapters on expert projections not kept stacked, or `composed`: the reference the
 * tests hold the grouped form to): the chosen ids read back once per layer.
 */
async function perExpertTrainingMoe(
  x: Tensor,
  residual: Tensor,
  ff: MoeTrainingFeedForward,
  routing: Routing,
  delta: ProjectionDelta | undefined,
): Promise<Tensor> {
  const mlp = ff.weights;
  const { topK, scoring, normalize, normalizeEps, scale } = routing;
  const experts = ff.experts.length;
  const all = linear(x, mlp.router.data, undefined, weightScaleOptions(mlp.router));
  // With a shared expert stacked as expert E, the router's row E is its gate: the routed logits are the first E.
  const logits = all.shape[1] > experts ? all.narrow(1, 0, experts) : all;
  const ids = noGrad(() => tidy(() => moeRoute(logits, topK, { scoring, normalize, normalizeEps, scale, selectionBias: mlp.selectionBias }).ids));
  const chosen = await ids.toArray();
  ids.dispose();
  const out = tidy(() => {
    const s = logits.shape[0];
    const mask = new Float32Array(s * experts);
    const tokens: number[][] = Array.from({ length: experts }, () => []);
    for (let t = 0; t < s; t++) {
      for (let j = 0; j < topK; j++) {
        const e = chosen[t * topK + j];
        mask[t * experts + e] = 1;
        tokens[e].push(t);
      }
    }
    const scores = scoring === 'sigmoid' ? float32(logits).sigmoid() : softmax(float32(logits), -1);
    let weights = scores.mul(tensor(mask, { shape: [s, experts], device: x.device }));
    if (normalize) weights = weights.div(weights.sum(-1, { keepdim: true }).add(normalizeEps ?? 0));
    if (scale !== undefined && scale !== 1) weights = weights.mul(scale);
    let out = residual;
    tokens.forEach((rows, e) => {
      if (rows.length === 0) return;
      const pick = new Float32Array(rows.length * s);
      rows.forEach((t, r) => (pick[r * s + t] = 1));
      const gather = tensor(pick, { shape: [rows.length, s], device: x.device });
      // Expert e's slices (a packed 4-bit stack's zero points too).
      const [gateUp, down] = [expertWeight(mlp.gateUp, e), expertWeight(mlp.down, e)];
      const sites = ff.experts[e];
      const xe = gather.matmul(x);
      const act = swiglu(withDeltas(linear(xe, gateUp.data, undefined, weightScaleOptions(gateUp)), xe, [sites.gate, sites.up], delta));
      const ye = withDeltas(linear(act, down.data, undefined, weightScaleOptions(down)), act, [sites.down], delta).mul(gather.matmul(weights.narrow(1, e, 1)));
      out = out.add(gather.transpose(0, 1).matmul(ye));
    });
    if (ff.shared) out = out.add(sharedExpertOutput(x, all, mlp, ff.shared, delta));
    return out;
  });
  if (logits !== all) logits.dispose();
  all.dispose(); // the tape holds what backward needs of it
  return out;
}
