// The training forward of the decoder families (Qwen3 / Qwen3-MoE, LFM2 / LFM2-MoE, Qwen3.5 / Qwen3.5-MoE) over
// their loaded weights: the same math as the inference forward, but from differentiable ops over a whole packed
// sequence, with no KV cache and none of the decode-only fusions (attentionInputs, the conv and DeltaNet states, the
// MoE expert kernels). Every projection is a ProjectionSite (its Hugging Face module path and the rows it holds in a
// stacked weight), so an adapter can add its delta to any of them and a merge can write into them.
import type { Tensor } from '../core/tensor.js';
import type { Weight } from '../formats/checkpoint.js';
import type { CausalLM } from '../models/causal-lm.js';
import { Qwen3Model } from '../models/qwen3/model.js';
import { Lfm2Model } from '../models/lfm2/model.js';
import { Qwen35Model } from '../models/qwen3_5/model.js';
import type { DeltaNetWeights, GatedAttentionWeights } from '../models/qwen3_5/weights.js';
import { weightScaleOptions, type AttentionGeometry, type Routing } from '../models/layers/blocks.js';
import type { AttentionWeights, DenseMlpWeights, MoeWeights } from '../models/layers/weights.js';
import type { ShortConvWeights } from '../models/lfm2/weights.js';
import { noGrad } from '../autograd/grad-mode.js';
import { tidy } from '../core/scope.js';
import { tensor, zeros } from '../ops/creation.js';
import { cast } from '../ops/convert.js';
import { indexSelect } from '../ops/index-select.js';
import { linear } from '../ops/matmul.js';
import { moeRoute } from '../ops/moe.js';
import { attention, rmsNorm, rope, swiglu } from '../ops/nn.js';
import { cat, select } from '../ops/shape-ops.js';
import { softmax } from '../ops/softmax.js';
import { float32 } from '../autograd/rules.js';
import { TensorGpuError } from '../core/errors.js';
import { project, projectStacked, site, withDeltas, type ProjectionDelta, type ProjectionSite } from './projection.js';
import { deltaNetForward, gatedAttentionForward, qwen35View } from './qwen3_5-training.js';
import type { DeltaNetMixing } from './gated-delta-rule.js';

export type { ProjectionSite, ProjectionDelta } from './projection.js';

export type Mixer =
  | {
      readonly kind: 'attention';
      readonly weights: AttentionWeights;
      readonly q: ProjectionSite;
      readonly k: ProjectionSite;
      readonly v: ProjectionSite;
      readonly o: ProjectionSite;
    }
  | { readonly kind: 'conv'; readonly weights: ShortConvWeights; readonly inProj: ProjectionSite; readonly outProj: ProjectionSite }
  | {
      readonly kind: 'deltaNet';
      readonly weights: DeltaNetWeights;
      readonly geometry: DeltaNetMixing & { readonly convKernel: number };
      readonly qkv: ProjectionSite;
      readonly z: ProjectionSite;
      readonly b: ProjectionSite;
      readonly a: ProjectionSite;
      readonly out: ProjectionSite;
    }
  | {
      readonly kind: 'gatedAttention';
      readonly weights: GatedAttentionWeights;
      readonly q: ProjectionSite;
      readonly k: ProjectionSite;
      readonly v: ProjectionSite;
      readonly o: ProjectionSite;
    };

export type MixerOf<K extends Mixer['kind']> = Extract<Mixer, { kind: K }>;

export type FeedForward =
  | { readonly kind: 'dense'; readonly weights: DenseMlpWeights; readonly gate: ProjectionSite; readonly up: ProjectionSite; readonly down: ProjectionSite }
  | { readonly kind: 'moe'; readonly weights: MoeWeights; readonly experts: readonly ExpertSites[]; readonly shared?: SharedExpertSites };

/**
 * A shared expert scaled by sigmoid(shared_expert_gate . x) (Qwen3.5-MoE): stacked as expert `expert` of the
 * routed experts' weights with its gate as that row of the router, or (`expert` undefined) weights.shared beside.
 */
export interface SharedExpertSites extends ExpertSites {
  readonly expert?: number;
}

/** One expert's projections (rows of the stacked gate|up and down weights). */
export interface ExpertSites {
  readonly gate: ProjectionSite;
  readonly up: ProjectionSite;
  readonly down: ProjectionSite;
}

export interface TrainingLayer {
  readonly mixerNorm: Tensor;
  readonly mixer: Mixer;
  readonly ffNorm: Tensor;
  readonly ff: FeedForward;
}

export type TrainingFamily = 'qwen3' | 'lfm2' | 'qwen3_5';

/** A loaded model seen for training: its weights by layer, every projection site, the tables the forward needs. */
export interface TrainingView {
  readonly family: TrainingFamily;
  readonly embedTokens: Tensor;
  readonly layers: readonly TrainingLayer[];
  readonly norm: Tensor;
  readonly eps: number;
  readonly lmHead: Weight;
  readonly routing?: Routing;
  readonly geometry: AttentionGeometry;
  readonly rope: { readonly cos: Tensor; readonly sin: Tensor };
  /** Every projection an adapter may target, in layer order. */
  readonly sites: readonly ProjectionSite[];
}

/** An MoE feed-forward with a site per expert projection (`<prefix>.experts.<e>.<gate|up|down>`). */
function moeFeedForward(prefix: string, m: MoeWeights, names: [string, string, string]): FeedForward {
  const [experts, rows] = [m.gateUp.data.shape[0], m.gateUp.data.shape[1] / 2];
  const at = (e: number) => `${prefix}.experts.${e}`;
  return {
    kind: 'moe',
    weights: m,
    experts: Array.from({ length: experts }, (_, e) => ({
      gate: site(`${at(e)}.${names[0]}`, m.gateUp, 0, rows, e),
      up: site(`${at(e)}.${names[1]}`, m.gateUp, rows, rows, e),
      down: site(`${at(e)}.${names[2]}`, m.down, 0, m.down.data.shape[1], e),
    })),
  };
}

function attentionMixer(prefix: string, a: AttentionWeights, g: AttentionGeometry, oName: string): Mixer {
  const [hq, hkv] = [g.heads * g.headDim, g.kvHeads * g.headDim];
  const parts = 'data' in a.qkv ? { q: [a.qkv, 0], k: [a.qkv, hq], v: [a.qkv, hq + hkv] } : { q: [a.qkv.q, 0], k: [a.qkv.k, 0], v: [a.qkv.v, 0] };
  const at = (m: 'q' | 'k' | 'v', rows: number) => site(`${prefix}.${m}_proj`, parts[m][0] as Weight, parts[m][1] as number, rows);
  return { kind: 'attention', weights: a, q: at('q', hq), k: at('k', hkv), v: at('v', hkv), o: site(`${prefix}.${oName}`, a.o, 0, a.o.data.shape[0]) };
}

function denseFeedForward(prefix: string, m: DenseMlpWeights, names: [string, string, string]): FeedForward {
  const rows = m.gateUp.data.shape[0] / 2;
  return {
    kind: 'dense',
    weights: m,
    gate: site(`${prefix}.${names[0]}`, m.gateUp, 0, rows),
    up: site(`${prefix}.${names[1]}`, m.gateUp, rows, rows),
    down: site(`${prefix}.${names[2]}`, m.down, 0, m.down.data.shape[0]),
  };
}

/** What both families' views share: embedding, final norm and head, routing, RoPE and the attention geometry. */
function commonView(model: Qwen3Model | Lfm2Model, eps: number) {
  const c = model.config;
  const w = model.weights;
  const geometry = { heads: c.numAttentionHeads, kvHeads: c.numKeyValueHeads, headDim: c.headDim, eps };
  return { embedTokens: w.embedTokens, norm: w.norm, eps, lmHead: w.lmHead, routing: model.routing, geometry, rope: model.rope };
}

/** The training view of a loaded Qwen3 / LFM2 / Qwen3.5 model (the weights are shared, not copied). */
export function trainingView(model: CausalLM): TrainingView {
  let view: Omit<TrainingView, 'sites'>;
  if (model instanceof Qwen3Model) {
    const common = commonView(model, model.config.rmsNormEps);
    view = {
      ...common,
      family: 'qwen3',
      layers: model.weights.layers.map((l, i) => ({
        mixerNorm: l.inputNorm,
        mixer: attentionMixer(`model.layers.${i}.self_attn`, l.attention, common.geometry, 'o_proj'),
        ffNorm: l.postAttentionNorm,
        ff: (l.mlp.kind === 'moe' ? moeFeedForward : denseFeedForward)(`model.layers.${i}.mlp`, l.mlp as never, ['gate_proj', 'up_proj', 'down_proj']),
      })),
    };
  } else if (model instanceof Lfm2Model) {
    const common = commonView(model, model.config.normEps);
    view = {
      ...common,
      family: 'lfm2',
      layers: model.weights.layers.map((l, i) => {
        const p = `model.layers.${i}`;
        const mixer: Mixer =
          l.op.kind === 'attention'
            ? attentionMixer(`${p}.self_attn`, l.op.attention, common.geometry, 'out_proj')
            : {
                kind: 'conv',
                weights: l.op.conv,
                inProj: site(`${p}.conv.in_proj`, l.op.conv.inProj, 0, l.op.conv.inProj.data.shape[0]),
                outProj: site(`${p}.conv.out_proj`, l.op.conv.outProj, 0, l.op.conv.outProj.data.shape[0]),
              };
        const ff = (l.feedForward.kind === 'moe' ? moeFeedForward : denseFeedForward)(`${p}.feed_forward`, l.feedForward as never, ['w1', 'w3', 'w2']);
        return { mixerNorm: l.operatorNorm, mixer, ffNorm: l.ffnNorm, ff };
      }),
    };
  } else if (model instanceof Qwen35Model) {
    view = qwen35View(model);
  } else {
    throw new TensorGpuError(`training supports the qwen3, lfm2 and qwen3_5 families, not '${model.config.modelType}'`);
  }
  const sites: ProjectionSite[] = [];
  for (const l of view.layers) {
    const m = l.mixer;
    if (m.kind === 'attention' || m.kind === 'gatedAttention') sites.push(m.q, m.k, m.v, m.o);
    else if (m.kind === 'conv') sites.push(m.inProj, m.outProj);
    else sites.push(m.qkv, m.z, m.b, m.a, m.out);
    const ff = l.ff;
    if (ff.kind === 'dense') sites.push(ff.gate, ff.up, ff.down);
    else {
      for (const e of ff.experts) sites.push(e.gate, e.up, e.down);
      if (ff.shared) sites.push(ff.shared.gate, ff.shared.up, ff.shared.down);
    }
  }
  return { ...view, sites };
}

function attentionForward(
  x: Tensor,
  h: Tensor,
  m: Extract<Mixer, { kind: 'attention' }>,
  g: AttentionGeometry,
  tables: TrainingView['rope'],
  delta?: ProjectionDelta,
): Tensor {
  const s = x.shape[0];
  const [hq, hkv] = [g.heads * g.headDim, g.kvHeads * g.headDim];
  const qkv = projectStacked(x, [m.q, m.k, m.v], delta);
  const heads = (start: number, width: number, n: number) => qkv.narrow(1, start, width).reshape(s, n, g.headDim);
  const q = rope(rmsNorm(heads(0, hq, g.heads), m.weights.qNorm, g.eps), tables.cos, tables.sin, 0);
  const k = rope(rmsNorm(heads(hq, hkv, g.kvHeads), m.weights.kNorm, g.eps), tables.cos, tables.sin, 0);
  const v = heads(hq + hkv, hkv, g.kvHeads);
  const attn = attention(q, k, v, { causal: true }).reshape(s, hq);
  return project(attn, m.o, delta, h);
}

/** LFM2's gated short conv over the whole sequence from zeros: C * (causal depthwise conv of B * x + bias). */
function convForward(x: Tensor, h: Tensor, m: Extract<Mixer, { kind: 'conv' }>, delta?: ProjectionDelta): Tensor {
  const cw = m.weights;
  const [s, width] = [x.shape[0], h.shape[1]];
  const bcx = project(x, m.inProj, delta, undefined, cw.inBias);
  const bx = bcx.narrow(1, 0, width).mul(bcx.narrow(1, 2 * width, width));
  const taps = float32(cw.taps);
  const l = taps.shape[1];
  const padded = l > 1 ? cat([zeros([l - 1, width], { device: x.device }), bx], 0) : bx;
  // Tap j reads the token l - 1 - j steps back; the last tap is on the current token.
  let conv = padded.narrow(0, 0, s).mul(taps.narrow(1, 0, 1).reshape(width));
  for (let j = 1; j < l; j++) conv = conv.add(padded.narrow(0, j, s).mul(taps.narrow(1, j, 1).reshape(width)));
  if (cw.tapsBias) conv = conv.add(float32(cw.tapsBias));
  return project(bcx.narrow(1, width, width).mul(conv), m.outProj, delta, h, cw.outBias);
}

/**
 * residual + MoE(x), as transformers' sparse MoE blocks compute it in training: the router's top-k chosen on the
 * device (read back once per layer), each chosen expert run on its tokens (gathered and scattered by one-hot
 * matmuls), weighted by the differentiable router scores of the chosen experts (renormalized, scaled); a shared
 * expert runs on every token, scaled by sigmoid of its gate's logit (the router's last row when it is stacked).
 */
async function moeForward(x: Tensor, residual: Tensor, ff: Extract<FeedForward, { kind: 'moe' }>, routing: Routing, delta?: ProjectionDelta): Promise<Tensor> {
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

export interface TrainingForwardOptions {
  /** The Gated DeltaNet's chunk (a power of two, default 64); `recurrent` runs its rule one token at a time. */
  readonly deltaRuleChunk?: number;
  readonly deltaRuleRecurrent?: boolean;
}

/** Logits [S, vocab] (float32) of a packed sequence of token ids (int32 [S] on the model's device). */
export async function trainingLogits(view: TrainingView, tokens: Tensor, delta?: ProjectionDelta, options: TrainingForwardOptions = {}): Promise<Tensor> {
  const s = tokens.shape[0];
  if (tokens.ndim !== 1 || s === 0) throw new RangeError(`trainingLogits: tokens must be a non-empty int32 [S], got ${tokens.describe()}`);
  if (s > view.rope.cos.shape[0])
    throw new RangeError(`trainingLogits: ${s} tokens exceed the model's ${view.rope.cos.shape[0]} RoPE positions (load it with a larger maxSequence)`);
  const tables = { cos: view.rope.cos.narrow(0, 0, s), sin: view.rope.sin.narrow(0, 0, s) };
  let h = tidy(() => cast(indexSelect(view.embedTokens, 0, tokens), 'float32'));
  try {
    for (const layer of view.layers) {
      const mixed = tidy(() => {
        const x = rmsNorm(h, layer.mixerNorm, view.eps);
        const m = layer.mixer;
        if (m.kind === 'attention') return attentionForward(x, h, m, view.geometry, tables, delta);
        if (m.kind === 'conv') return convForward(x, h, m, delta);
        if (m.kind === 'gatedAttention') return gatedAttentionForward(x, h, m, view.geometry, tables, delta);
        return deltaNetForward(x, h, m, delta, { chunk: options.deltaRuleChunk, recurrent: options.deltaRuleRecurrent });
      });
      h.dispose();
      h = mixed;
      const ff = layer.ff;
      const normed = rmsNorm(h, layer.ffNorm, view.eps);
      const next =
        ff.kind === 'dense'
          ? tidy(() => project(swiglu(projectStacked(normed, [ff.gate, ff.up], delta)), ff.down, delta, h))
          : await moeForward(normed, h, ff, view.routing!, delta);
      normed.dispose();
      h.dispose();
      h = next;
    }
    return tidy(() => linear(rmsNorm(h, view.norm, view.eps), view.lmHead.data, undefined, weightScaleOptions(view.lmHead)));
  } finally {
    h.dispose();
    tables.cos.dispose();
    tables.sin.dispose();
  }
}
