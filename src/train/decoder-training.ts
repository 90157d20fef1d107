// The training forward of the decoder families (Qwen3 / Qwen3-MoE, LFM2 / LFM2-MoE) over their loaded weights:
// the same math as the inference forward, but from differentiable ops over a whole packed sequence, with no KV
// cache and none of the decode-only fusions (attentionInputs, the conv state, the MoE expert kernels). Every
// projection is a ProjectionSite (its Hugging Face module path and the rows it holds in a stacked weight), so an
// adapter can add its delta to any of them and a merge can write into them.
import type { Tensor } from '../core/tensor.js';
import type { Weight } from '../io/checkpoint.js';
import type { CausalLM } from '../models/causal-lm.js';
import { Qwen3Model } from '../models/qwen3/model.js';
import { Lfm2Model } from '../models/lfm2/model.js';
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

/** One linear layer as an adapter sees it: where it lives in the checkpoint and in the (stacked) loaded weight. */
export interface ProjectionSite {
  /** The Hugging Face module path, e.g. 'model.layers.0.self_attn.q_proj'. */
  readonly name: string;
  /** Its last component ('q_proj'), what PEFT's target_modules match. */
  readonly module: string;
  readonly inFeatures: number;
  readonly outFeatures: number;
  /** The loaded weight holding its rows (q|k|v and gate|up are stacked at load). */
  readonly weight: Weight;
  readonly rowOffset: number;
  /** For an MoE expert: its index into the stacked [E, N, K] weight. */
  readonly expert?: number;
}

/** An adapter's contribution x -> delta [S, outFeatures] at a site, or undefined where it has none. */
export type ProjectionDelta = (site: ProjectionSite, x: Tensor) => Tensor | undefined;

type Mixer =
  | { readonly kind: 'attention'; readonly weights: AttentionWeights; readonly q: ProjectionSite; readonly k: ProjectionSite; readonly v: ProjectionSite; readonly o: ProjectionSite }
  | { readonly kind: 'conv'; readonly weights: ShortConvWeights; readonly inProj: ProjectionSite; readonly outProj: ProjectionSite };

type FeedForward =
  | { readonly kind: 'dense'; readonly weights: DenseMlpWeights; readonly gate: ProjectionSite; readonly up: ProjectionSite; readonly down: ProjectionSite }
  | { readonly kind: 'moe'; readonly weights: MoeWeights; readonly experts: readonly ExpertSites[] };

/** One expert's projections (rows of the stacked gate|up and down weights). */
interface ExpertSites {
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

/** A loaded model seen for training: its weights by layer, every projection site, the tables the forward needs. */
export interface TrainingView {
  readonly family: 'qwen3' | 'lfm2';
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

function site(name: string, weight: Weight, rowOffset: number, outFeatures: number, expert?: number): ProjectionSite {
  return { name, module: name.slice(name.lastIndexOf('.') + 1), inFeatures: weight.data.shape[weight.data.ndim - 1], outFeatures, weight, rowOffset, expert };
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
  return { kind: 'dense', weights: m, gate: site(`${prefix}.${names[0]}`, m.gateUp, 0, rows), up: site(`${prefix}.${names[1]}`, m.gateUp, rows, rows), down: site(`${prefix}.${names[2]}`, m.down, 0, m.down.data.shape[0]) };
}

/** What both families' views share: embedding, final norm and head, routing, RoPE and the attention geometry. */
function commonView(model: Qwen3Model | Lfm2Model, eps: number) {
  const c = model.config;
  const w = model.weights;
  const geometry = { heads: c.numAttentionHeads, kvHeads: c.numKeyValueHeads, headDim: c.headDim, eps };
  return { embedTokens: w.embedTokens, norm: w.norm, eps, lmHead: w.lmHead, routing: model.routing, geometry, rope: model.rope };
}

/** The training view of a loaded Qwen3 / LFM2 model (the weights are shared, not copied). */
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
            : { kind: 'conv', weights: l.op.conv, inProj: site(`${p}.conv.in_proj`, l.op.conv.inProj, 0, l.op.conv.inProj.data.shape[0]), outProj: site(`${p}.conv.out_proj`, l.op.conv.outProj, 0, l.op.conv.outProj.data.shape[0]) };
        const ff = (l.feedForward.kind === 'moe' ? moeFeedForward : denseFeedForward)(`${p}.feed_forward`, l.feedForward as never, ['w1', 'w3', 'w2']);
        return { mixerNorm: l.operatorNorm, mixer, ffNorm: l.ffnNorm, ff };
      }),
    };
  } else {
    throw new TensorGpuError(`training supports the qwen3 and lfm2 families, not '${model.config.modelType}'`);
  }
  const sites: ProjectionSite[] = [];
  for (const l of view.layers) {
    const m = l.mixer;
    sites.push(...(m.kind === 'attention' ? [m.q, m.k, m.v, m.o] : [m.inProj, m.outProj]));
    if (l.ff.kind === 'dense') sites.push(l.ff.gate, l.ff.up, l.ff.down);
    else for (const e of l.ff.experts) sites.push(e.gate, e.up, e.down);
  }
  return { ...view, sites };
}

/** x W^T (+ bias, + residual) plus the adapter's delta at this site. */
function project(x: Tensor, s: ProjectionSite, delta: ProjectionDelta | undefined, residual?: Tensor, bias?: Tensor): Tensor {
  const y = linear(x, s.weight.data, bias, { ...weightScaleOptions(s.weight), residual });
  const d = delta?.(s, x);
  return d ? y.add(d) : y;
}

/** Sites stacked in one weight: one linear, the deltas (zeros where a site has none) added side by side. */
function projectStacked(x: Tensor, sites: readonly ProjectionSite[], delta: ProjectionDelta | undefined): Tensor {
  const w = sites[0].weight;
  if (!sites.every((s) => s.weight === w)) return cat(sites.map((s) => project(x, s, delta)), 1);
  return withDeltas(linear(x, w.data, undefined, weightScaleOptions(w)), x, sites, delta);
}

/** y (the sites' outputs side by side) plus their deltas at x, zeros where a site has none. */
function withDeltas(y: Tensor, x: Tensor, sites: readonly ProjectionSite[], delta: ProjectionDelta | undefined): Tensor {
  const deltas = sites.map((s) => delta?.(s, x));
  if (deltas.every((d) => d === undefined)) return y;
  if (deltas.length === 1) return y.add(deltas[0]!);
  return y.add(cat(deltas.map((d, i) => d ?? zeros([x.shape[0], sites[i].outFeatures], { device: x.device })), 1));
}

function attentionForward(x: Tensor, h: Tensor, m: Extract<Mixer, { kind: 'attention' }>, g: AttentionGeometry, tables: TrainingView['rope'], delta?: ProjectionDelta): Tensor {
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
 * matmuls), weighted by the differentiable router scores of the chosen experts (renormalized, scaled).
 */
async function moeForward(x: Tensor, residual: Tensor, ff: Extract<FeedForward, { kind: 'moe' }>, routing: Routing, delta?: ProjectionDelta): Promise<Tensor> {
  const mlp = ff.weights;
  const { topK, scoring, normalize, normalizeEps, scale } = routing;
  const logits = linear(x, mlp.router.data, undefined, weightScaleOptions(mlp.router));
  const ids = noGrad(() => tidy(() => moeRoute(logits, topK, { scoring, normalize, normalizeEps, scale, selectionBias: mlp.selectionBias }).ids));
  const chosen = await ids.toArray();
  ids.dispose();
  const out = tidy(() => {
    const [s, experts] = logits.shape;
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
    return out;
  });
  logits.dispose(); // the tape holds what backward needs of it
  return out;
}

/** Logits [S, vocab] (float32) of a packed sequence of token ids (int32 [S] on the model's device). */
export async function trainingLogits(view: TrainingView, tokens: Tensor, delta?: ProjectionDelta): Promise<Tensor> {
  const s = tokens.shape[0];
  if (tokens.ndim !== 1 || s === 0) throw new RangeError(`trainingLogits: tokens must be a non-empty int32 [S], got ${tokens.describe()}`);
  if (s > view.rope.cos.shape[0]) throw new RangeError(`trainingLogits: ${s} tokens exceed the model's ${view.rope.cos.shape[0]} RoPE positions (load it with a larger maxSequence)`);
  const tables = { cos: view.rope.cos.narrow(0, 0, s), sin: view.rope.sin.narrow(0, 0, s) };
  let h = tidy(() => cast(indexSelect(view.embedTokens, 0, tokens), 'float32'));
  try {
    for (const layer of view.layers) {
      const mixed = tidy(() => {
        const x = rmsNorm(h, layer.mixerNorm, view.eps);
        return layer.mixer.kind === 'attention' ? attentionForward(x, h, layer.mixer, view.geometry, tables, delta) : convForward(x, h, layer.mixer, delta);
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
