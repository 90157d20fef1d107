// The MoE feed-forward for training, differentiable in the router scores and (through the LoRA sites) every expert.
import type { Tensor } from '../../core/tensor.js';
import type { Weight } from '../../formats/checkpoint.js';
import { noGrad } from '../../autograd/grad-mode.js';
import { float32 } from '../../ops/grad-rules.js';
import { tidy } from '../../core/scope.js';
import { tensor } from '../../ops/creation.js';
import { linear } from '../../ops/matmul.js';
import { moeRoute } from '../../ops/moe.js';
import { swiglu } from '../../ops/nn.js';
import { select } from '../../ops/shape-ops.js';
import { softmax } from '../../ops/softmax.js';
import { weightScaleOptions, type Routing } from './blocks.js';
import { withDeltas, type ProjectionDelta } from './projection-site.js';
import type { MoeTrainingFeedForward } from './training-blocks.js';

/**
 * residual + MoE(x), as transformers' sparse MoE blocks compute it in training: the router's top-k chosen on the
 * device (read back once per layer), each chosen expert run on its tokens (gathered and scattered by one-hot
 * matmuls), weighted by the differentiable router scores of the chosen experts (renormalized, scaled); a shared
 * expert runs on every token, scaled by sigmoid of its gate's logit (the router's last row when it is stacked).
 */
export async function trainingMoe(x: Tensor, residual: Tensor, ff: MoeTrainingFeedForward, routing: Routing, delta?: ProjectionDelta): Promise<Tensor> {
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
      const expert = (w: Weight): Weight => ({ data: select(w.data, 0, e), scale: w.scale && select(w.scale, 0, e), recipe: w.recipe });
      const [gateUp, down] = [expert(mlp.gateUp), expert(mlp.down)];
      const sites = ff.experts[e];
      const xe = gather.matmul(x);
      const act = swiglu(withDeltas(linear(xe, gateUp.data, undefined, weightScaleOptions(gateUp)), xe, [sites.gate, sites.up], delta));
      const ye = withDeltas(linear(act, down.data, undefined, weightScaleOptions(down)), act, [sites.down], delta).mul(gather.matmul(weights.narrow(1, e, 1)));
      out = out.add(gather.transpose(0, 1).matmul(ye));
    });
    const shared = ff.shared;
    if (shared) {
      const e = shared.expert;
      const pick = (w: Weight): Weight => (e === undefined ? w : { data: select(w.data, 0, e), scale: w.scale && select(w.scale, 0, e), recipe: w.recipe });
      const [gateUp, down] = e === undefined ? [mlp.shared!.mlp.gateUp, mlp.shared!.mlp.down] : [pick(mlp.gateUp), pick(mlp.down)];
      const gateLogit = e === undefined ? linear(x, mlp.shared!.gate.data, undefined, weightScaleOptions(mlp.shared!.gate)) : all.narrow(1, e, 1);
      const act = swiglu(withDeltas(linear(x, gateUp.data, undefined, weightScaleOptions(gateUp)), x, [shared.gate, shared.up], delta));
      const y = withDeltas(linear(act, down.data, undefined, weightScaleOptions(down)), act, [shared.down], delta);
      out = out.add(y.mul(float32(gateLogit).sigmoid()));
    }
    return out;
  });
  if (logits !== all) logits.dispose();
  all.dispose(); // the tape holds what backward needs of it
  return out;
}
