// The training form of the shared decoder forward: a family's layers seen for training (their weights, every LoRA
// site under its Hugging Face module path, a differentiable token mixer per layer) and the steps the one loop
// (decoder-forward.ts) runs over a whole packed sequence: the same math as inference, but from differentiable ops,
// with no cache and none of the decode-only fusions, and the adapter's delta added at each projection site.
// A family builds its DecoderTrainingBlocks in its own folder; what is common (attention with q/k norm and RoPE, the
// dense and MoE feed-forwards, the sites of stacked weights) is here.
import type { Tensor } from '../../core/tensor.js';
import type { Weight } from '../../formats/checkpoint.js';
import { tidy } from '../../core/scope.js';
import { cast } from '../../ops/convert.js';
import { indexSelect } from '../../ops/index-select.js';
import { linear } from '../../ops/matmul.js';
import { attention, rmsNorm, rope, swiglu } from '../../ops/nn.js';
import { weightScaleOptions, type AttentionGeometry, type Routing } from './blocks.js';
import type { DecoderTrunk } from './decoder-blocks.js';
import type { DecoderSteps } from './decoder-forward.js';
import { projectSite, projectSites, site, type ProjectionDelta, type ProjectionSite } from './projection-site.js';
import { trainingMoe } from './training-moe.js';
import type { AttentionWeights, DenseMlpWeights, MoeWeights } from './weights.js';

/** Options of a family's training mixers (Qwen3.5's DeltaNet: its rule's chunk, or the recurrent form). */
export interface TrainingForwardOptions {
  /** The Gated DeltaNet's chunk (a power of two, default 64); `recurrent` runs its rule one token at a time. */
  readonly deltaRuleChunk?: number;
  readonly deltaRuleRecurrent?: boolean;
  /** Run each chosen MoE expert with per-expert ops even where the grouped experts apply (tests compare the two). */
  readonly moeComposed?: boolean;
}

/** What a training mixer reads besides its weights: the RoPE tables of the sequence, the adapter, the options. */
export interface TrainingContext {
  /** cos/sin [S, rotary / 2] for the sequence's positions. */
  readonly rope: { readonly cos: Tensor; readonly sin: Tensor };
  readonly delta?: ProjectionDelta;
  readonly options: TrainingForwardOptions;
}

/** A layer's token mixer for training: its projection sites (in order) and its differentiable forward. */
export interface TrainingMixer {
  /** What it is ('attention', 'conv', 'deltaNet', ...), for callers that look. */
  readonly kind: string;
  readonly sites: readonly ProjectionSite[];
  /** h + mixer(x), x the normed h. */
  forward(x: Tensor, h: Tensor, context: TrainingContext): Tensor;
}

/** One expert's projections (rows of the stacked gate|up and down weights). */
export interface ExpertSites {
  readonly gate: ProjectionSite;
  readonly up: ProjectionSite;
  readonly down: ProjectionSite;
}

/**
 * A shared expert scaled by sigmoid(shared_expert_gate . x) (Qwen3.5-MoE): stacked as expert `expert` of the
 * routed experts' weights with its gate as that row of the router, or (`expert` undefined) weights.shared beside.
 */
export interface SharedExpertSites extends ExpertSites {
  readonly expert?: number;
}

export interface DenseTrainingFeedForward extends ExpertSites {
  readonly kind: 'dense';
  readonly weights: DenseMlpWeights;
}

export interface MoeTrainingFeedForward {
  readonly kind: 'moe';
  readonly weights: MoeWeights;
  readonly experts: readonly ExpertSites[];
  readonly shared?: SharedExpertSites;
}

export type TrainingFeedForward = DenseTrainingFeedForward | MoeTrainingFeedForward;

export interface TrainingLayer {
  readonly mixerNorm: Tensor;
  readonly mixer: TrainingMixer;
  readonly ffNorm: Tensor;
  readonly ff: TrainingFeedForward;
}

/** A loaded model seen for training: its weights by layer, every projection site, the tables the forward needs. */
export interface DecoderTrainingBlocks {
  /** The family's model_type-like name ('qwen3', 'lfm2', 'qwen3_5'). */
  readonly family: string;
  readonly embedTokens: Tensor;
  readonly layers: readonly TrainingLayer[];
  readonly norm: Tensor;
  readonly eps: number;
  readonly lmHead: Weight;
  readonly routing?: Routing;
  /** The model's RoPE tables [maxSequence, rotary / 2]. */
  readonly rope: { readonly cos: Tensor; readonly sin: Tensor };
  /** Every projection an adapter may target, in layer order. */
  readonly sites: readonly ProjectionSite[];
  /** PEFT target_modules by default: every projection, and the mixers' alone (what an MoE model adapts). */
  readonly loraTargets: { readonly all: readonly string[]; readonly mixers: readonly string[] };
  /** Hands each weight to `add` under its Hugging Face name, in checkpoint order (a full fine-tune's export). */
  exportWeights(add: (name: string, t: Tensor) => void): void;
}

/**
 * A family's training view, built the same way for every family: the trunk (embedding, norm, head, routing, RoPE
 * tables) from its inference blocks, its own training layers, LoRA targets and checkpoint export.
 */
export function familyTrainingBlocks<L extends TrainingLayer>(
  family: string,
  trunk: DecoderTrunk & { readonly rope: DecoderTrainingBlocks['rope'] },
  layers: readonly L[],
  loraTargets: DecoderTrainingBlocks['loraTargets'],
  exportWeights: (add: (name: string, t: Tensor) => void, layers: readonly L[]) => void,
): DecoderTrainingBlocks {
  const { embedTokens, norm, eps, lmHead, routing, rope } = trunk;
  return {
    family,
    embedTokens,
    layers,
    norm,
    eps,
    lmHead,
    routing,
    rope,
    sites: layerSites(layers),
    loraTargets,
    exportWeights: (add) => exportWeights(add, layers),
  };
}

/** A family whose layers can be trained. */
export interface TrainableDecoderBlocks {
  training(): DecoderTrainingBlocks;
}

export function isTrainable(blocks: object): blocks is TrainableDecoderBlocks {
  return typeof (blocks as Partial<TrainableDecoderBlocks>).training === 'function';
}

/** Every site of the layers, in layer order: the mixer's, then the feed-forward's (experts, then a shared one). */
export function layerSites(layers: readonly TrainingLayer[]): ProjectionSite[] {
  const sites: ProjectionSite[] = [];
  for (const l of layers) {
    sites.push(...l.mixer.sites);
    const ff = l.ff;
    if (ff.kind === 'dense') sites.push(ff.gate, ff.up, ff.down);
    else {
      for (const e of ff.experts) sites.push(e.gate, e.up, e.down);
      if (ff.shared) sites.push(ff.shared.gate, ff.shared.up, ff.shared.down);
    }
  }
  return sites;
}

/** Sites of a SwiGLU MLP's gate|up (stacked by rows) and down, named `<prefix>.<names[i]>`. */
export function denseSites(prefix: string, m: DenseMlpWeights, names: readonly [string, string, string]): ExpertSites {
  const rows = m.gateUp.data.shape[0] / 2;
  return {
    gate: site(`${prefix}.${names[0]}`, m.gateUp, 0, rows),
    up: site(`${prefix}.${names[1]}`, m.gateUp, rows, rows),
    down: site(`${prefix}.${names[2]}`, m.down, 0, m.down.data.shape[0]),
  };
}

export function denseFeedForward(prefix: string, m: DenseMlpWeights, names: readonly [string, string, string]): DenseTrainingFeedForward {
  return { kind: 'dense', weights: m, ...denseSites(prefix, m, names) };
}

/** A site per projection of each of the first `experts` stacked experts (`<prefix>.experts.<e>.<name>`). */
export function expertSites(prefix: string, m: MoeWeights, names: readonly [string, string, string], experts = m.gateUp.data.shape[0]): ExpertSites[] {
  const [rows, hidden] = [m.gateUp.data.shape[1] / 2, m.down.data.shape[1]];
  return Array.from({ length: experts }, (_, e) => expertAt(`${prefix}.experts.${e}`, m, names, e, rows, hidden));
}

/** Expert e's sites of the stacked gate|up [E, 2I, H] and down [E, H, I], named `<at>.<name>`. */
export function expertAt(
  at: string,
  m: MoeWeights,
  names: readonly [string, string, string],
  e: number,
  rows = m.gateUp.data.shape[1] / 2,
  hidden = m.down.data.shape[1],
): ExpertSites {
  return {
    gate: site(`${at}.${names[0]}`, m.gateUp, 0, rows, e),
    up: site(`${at}.${names[1]}`, m.gateUp, rows, rows, e),
    down: site(`${at}.${names[2]}`, m.down, 0, hidden, e),
  };
}

/** Attention with q/k RMSNorm and RoPE (Qwen3's and LFM2's): its q|k|v (stacked, or three) and o sites. */
export interface AttentionTrainingMixer extends TrainingMixer {
  readonly kind: 'attention';
  readonly weights: AttentionWeights;
  readonly geometry: AttentionGeometry;
  readonly q: ProjectionSite;
  readonly k: ProjectionSite;
  readonly v: ProjectionSite;
  readonly o: ProjectionSite;
}

/** The attention mixer of `<prefix>.{q,k,v}_proj` and `<prefix>.<oName>`. */
export function attentionMixer(prefix: string, a: AttentionWeights, g: AttentionGeometry, oName: string): AttentionTrainingMixer {
  const [hq, hkv] = [g.heads * g.headDim, g.kvHeads * g.headDim];
  const parts = 'data' in a.qkv ? { q: [a.qkv, 0], k: [a.qkv, hq], v: [a.qkv, hq + hkv] } : { q: [a.qkv.q, 0], k: [a.qkv.k, 0], v: [a.qkv.v, 0] };
  const at = (m: 'q' | 'k' | 'v', rows: number) => site(`${prefix}.${m}_proj`, parts[m][0] as Weight, parts[m][1] as number, rows);
  const [q, k, v, o] = [at('q', hq), at('k', hkv), at('v', hkv), site(`${prefix}.${oName}`, a.o, 0, a.o.data.shape[0])];
  return { kind: 'attention', weights: a, geometry: g, q, k, v, o, sites: [q, k, v, o], forward: (x, h, c) => attentionForward(x, h, q, k, v, o, a, g, c) };
}

function attentionForward(
  x: Tensor,
  h: Tensor,
  qs: ProjectionSite,
  ks: ProjectionSite,
  vs: ProjectionSite,
  os: ProjectionSite,
  a: AttentionWeights,
  g: AttentionGeometry,
  { rope: tables, delta }: TrainingContext,
): Tensor {
  const s = x.shape[0];
  const [hq, hkv] = [g.heads * g.headDim, g.kvHeads * g.headDim];
  const qkv = projectSites(x, [qs, ks, vs], delta);
  const heads = (start: number, width: number, n: number) => qkv.narrow(1, start, width).reshape(s, n, g.headDim);
  const q = rope(rmsNorm(heads(0, hq, g.heads), a.qNorm, g.eps), tables.cos, tables.sin, 0);
  const k = rope(rmsNorm(heads(hq, hkv, g.kvHeads), a.kNorm, g.eps), tables.cos, tables.sin, 0);
  const v = heads(hq + hkv, hkv, g.kvHeads);
  const attn = attention(q, k, v, { causal: true }).reshape(s, hq);
  return projectSite(attn, os, delta, h);
}

/** x + layer's feed-forward over its normed input (a promise where the MoE's per-expert form reads its top-k back). */
function trainingFeedForward(
  blocks: DecoderTrainingBlocks,
  x: Tensor,
  layer: TrainingLayer,
  delta: ProjectionDelta | undefined,
  options: TrainingForwardOptions,
): Tensor | Promise<Tensor> {
  const ff = layer.ff;
  const normed = rmsNorm(x, layer.ffNorm, blocks.eps);
  if (ff.kind === 'dense') {
    const out = tidy(() => projectSite(swiglu(projectSites(normed, [ff.gate, ff.up], delta)), ff.down, delta, x));
    normed.dispose();
    return out;
  }
  const out = trainingMoe(normed, x, ff, blocks.routing!, delta, { composed: options.moeComposed });
  if (!(out instanceof Promise)) {
    normed.dispose();
    return out;
  }
  return out.then((y) => {
    normed.dispose();
    return y;
  });
}

/** The training form's steps: the family's differentiable mixers, the feed-forwards with the adapter's deltas. */
export function trainingSteps(blocks: DecoderTrainingBlocks, context: TrainingContext): DecoderSteps {
  return {
    numLayers: blocks.layers.length,
    embed: (tokens) => cast(indexSelect(blocks.embedTokens, 0, tokens), 'float32'),
    mix: (h, i) => {
      const layer = blocks.layers[i];
      return layer.mixer.forward(rmsNorm(h, layer.mixerNorm, blocks.eps), h, context);
    },
    feedForward: (x, i) => trainingFeedForward(blocks, x, blocks.layers[i], context.delta, context.options),
    head: (h) => linear(rmsNorm(h, blocks.norm, blocks.eps), blocks.lmHead.data, undefined, weightScaleOptions(blocks.lmHead)),
  };
}

/** Each stacked expert's gate, up and down under `<prefix>.experts.<e>.<name>` (the export of a routed MoE). */
export function exportExperts(add: (name: string, t: Tensor) => void, prefix: string, w: MoeWeights, names: readonly [string, string, string]): void {
  const half = w.gateUp.data.shape[1] / 2;
  for (let e = 0; e < w.gateUp.data.shape[0]; e++) {
    const gu = w.gateUp.data.select(0, e);
    add(`${prefix}.experts.${e}.${names[0]}.weight`, gu.narrow(0, 0, half));
    add(`${prefix}.experts.${e}.${names[1]}.weight`, gu.narrow(0, half, half));
    add(`${prefix}.experts.${e}.${names[2]}.weight`, w.down.data.select(0, e));
  }
}
