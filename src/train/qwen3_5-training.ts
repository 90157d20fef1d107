// Qwen3.5 / Qwen3.5-MoE (Qwen3.6) for training: the projection sites under their release module paths
// (model.language_model.layers.N.{linear_attn,self_attn,mlp}.*) over the weights as the loader arranged them, and
// the two mixers' training forwards: the Gated DeltaNet composed from differentiable ops (gated-delta-rule.ts) and
// the gated attention (q/k norm with 1 + w folded, partial RoPE, causal attention times sigmoid(gate)).
//
// Where the loader rearranged rows the sites map them back, so adapters, merges and exports use the checkpoint's
// layout: the DeltaNet's in_proj_qkv | in_proj_z | in_proj_b | in_proj_a are row ranges of one stacked weight (or
// four apart); the attention's q_proj, per head [query | gate] in the checkpoint, was regrouped into all queries and
// all gates around k and v ([q | k | v | gate]), so its site is `interleaved` (PEFT's lora_B of q_proj has the
// checkpoint's row order). The routed experts' sites are `mlp.experts.<e>.gate_proj|up_proj|down_proj`, the names
// the existing MoE families and the experts-one-by-one (FP8) checkpoints use: the release fuses them into 3-D
// `mlp.experts.gate_up_proj` [E, 2I, H] (each expert's gate rows, then its up rows) and `mlp.experts.down_proj`
// [E, H, I], parameters rather than nn.Linear modules, so PEFT's target_modules cannot reach them; expert e's
// gate_proj is rows [0, I) of gate_up_proj[e], up_proj rows [I, 2I), down_proj down_proj[e]. The shared expert's
// sites are `mlp.shared_expert.*` whether the loader stacked it as expert E or kept it beside.
import type { Tensor } from '../core/tensor.js';
import type { Weight } from '../formats/checkpoint.js';
import { weightScaleOptions, type AttentionGeometry } from '../models/layers/blocks.js';
import type { DenseMlpWeights } from '../models/layers/weights.js';
import { deltaNetWidths, TEXT_PREFIX } from '../models/qwen3_5/layout.js';
import type { Qwen35Model } from '../models/qwen3_5/model.js';
import type { DeltaNetWeights, GatedAttentionWeights, Qwen35MoeWeights } from '../models/qwen3_5/weights.js';
import type { Qwen35Config } from '../models/qwen3_5/config.js';
import { zeros } from '../ops/creation.js';
import { linear } from '../ops/matmul.js';
import { attention, rmsNorm, rope } from '../ops/nn.js';
import { cat } from '../ops/shape-ops.js';
import type { FeedForward, MixerOf, TrainingView } from './decoder-training.js';
import { gatedDeltaNetMixing } from './gated-delta-rule.js';
import { project, projectStacked, site, siteParts, type ProjectionDelta, type ProjectionSite } from './projection.js';

const parts = (w: Weight | readonly Weight[]): readonly Weight[] => ('data' in w ? [w as Weight] : (w as readonly Weight[]));

/** Sites for row ranges of a weight stacked at load (or of its parts kept apart), in stacking order. */
function stackedSites(prefix: string, w: Weight | readonly Weight[], names: readonly string[], widths: readonly number[]): ProjectionSite[] {
  if (!('data' in w)) return names.map((n, i) => site(`${prefix}.${n}`, (w as readonly Weight[])[i], 0, widths[i]));
  let at = 0;
  return names.map((n, i) => {
    const s = site(`${prefix}.${n}`, w as Weight, at, widths[i]);
    at += widths[i];
    return s;
  });
}

function deltaNetMixer(prefix: string, m: DeltaNetWeights, c: Qwen35Config): MixerOf<'deltaNet'> {
  const { valueDim, convDim } = deltaNetWidths(c);
  const l = c.linear;
  const hv = l.numValueHeads;
  const [qkv, z, b, a] = stackedSites(prefix, m.inProj, ['in_proj_qkv', 'in_proj_z', 'in_proj_b', 'in_proj_a'], [convDim, valueDim, hv, hv]);
  const geometry = { keyHeads: l.numKeyHeads, valueHeads: hv, keyDim: l.keyHeadDim, valueDim: l.valueHeadDim, convKernel: l.convKernel, eps: c.rmsNormEps };
  return { kind: 'deltaNet', weights: m, geometry, qkv, z, b, a, out: site(`${prefix}.out_proj`, m.outProj, 0, m.outProj.data.shape[0]) };
}

function gatedAttentionMixer(prefix: string, m: GatedAttentionWeights, c: Qwen35Config): MixerOf<'gatedAttention'> {
  const d = c.headDim;
  const [hq, hkv] = [c.numAttentionHeads * d, c.numKeyValueHeads * d];
  const [queries, k, v, gates] = stackedSites(prefix, m.qkvg, ['q_proj', 'k_proj', 'v_proj', 'q_proj'], [hq, hkv, hkv, hq]);
  const q: ProjectionSite = {
    ...site(`${prefix}.q_proj`, queries.weight, queries.rowOffset, 2 * hq),
    interleaved: { heads: c.numAttentionHeads, width: d, parts: [queries, gates].map((s) => ({ weight: s.weight, rowOffset: s.rowOffset })) },
  };
  return { kind: 'gatedAttention', weights: m, q, k, v, o: site(`${prefix}.o_proj`, m.o, 0, m.o.data.shape[0]) };
}

function sharedDense(prefix: string, mlp: DenseMlpWeights) {
  const rows = mlp.gateUp.data.shape[0] / 2;
  return {
    gate: site(`${prefix}.gate_proj`, mlp.gateUp, 0, rows),
    up: site(`${prefix}.up_proj`, mlp.gateUp, rows, rows),
    down: site(`${prefix}.down_proj`, mlp.down, 0, mlp.down.data.shape[0]),
  };
}

function moeFeedForward(prefix: string, m: Qwen35MoeWeights, experts: number): FeedForward {
  const rows = m.gateUp.data.shape[1] / 2;
  const hidden = m.down.data.shape[1];
  const expert = (at: string, e: number) => ({
    gate: site(`${at}.gate_proj`, m.gateUp, 0, rows, e),
    up: site(`${at}.up_proj`, m.gateUp, rows, rows, e),
    down: site(`${at}.down_proj`, m.down, 0, hidden, e),
  });
  const shared = m.sharedInStack
    ? { ...expert(`${prefix}.shared_expert`, experts), expert: experts }
    : m.shared
      ? sharedDense(`${prefix}.shared_expert`, m.shared.mlp)
      : undefined;
  return { kind: 'moe', weights: m, experts: Array.from({ length: experts }, (_, e) => expert(`${prefix}.experts.${e}`, e)), shared };
}

function denseFeedForward(prefix: string, m: DenseMlpWeights): FeedForward {
  return { kind: 'dense', weights: m, ...sharedDense(prefix, m) };
}

/** The training view of a loaded Qwen3.5 / Qwen3.5-MoE model, but for its list of sites. */
export function qwen35View(model: Qwen35Model): Omit<TrainingView, 'sites'> {
  const c = model.config;
  const w = model.weights;
  const eps = c.rmsNormEps;
  const layers = w.layers.map((l, i) => {
    const p = `${TEXT_PREFIX}layers.${i}`;
    const mixer = l.mixer.kind === 'linear_attention' ? deltaNetMixer(`${p}.linear_attn`, l.mixer, c) : gatedAttentionMixer(`${p}.self_attn`, l.mixer, c);
    const ff = l.mlp.kind === 'moe' ? moeFeedForward(`${p}.mlp`, l.mlp as Qwen35MoeWeights, c.moe!.numExperts) : denseFeedForward(`${p}.mlp`, l.mlp);
    return { mixerNorm: l.inputNorm, mixer, ffNorm: l.postNorm, ff };
  });
  const geometry = { heads: c.numAttentionHeads, kvHeads: c.numKeyValueHeads, headDim: c.headDim, eps };
  return { family: 'qwen3_5', embedTokens: w.embedTokens, layers, norm: w.norm, eps, lmHead: w.lmHead, routing: model.routing, geometry, rope: model.rope };
}

/** h + out_proj(gated norm(delta rule(conv(qkv)))) from the [qkv | z | b | a] projection, every piece differentiable. */
export function deltaNetForward(
  x: Tensor,
  h: Tensor,
  m: MixerOf<'deltaNet'>,
  delta: ProjectionDelta | undefined,
  options: { chunk?: number; recurrent?: boolean },
): Tensor {
  const proj = projectStacked(x, [m.qkv, m.z, m.b, m.a], delta);
  const [convDim, valueWidth, hv] = [m.qkv.outFeatures, m.z.outFeatures, m.b.outFeatures];
  const inputs = {
    qkv: proj.narrow(1, 0, convDim),
    z: proj.narrow(1, convDim, valueWidth),
    b: proj.narrow(1, convDim + valueWidth, hv),
    a: proj.narrow(1, convDim + valueWidth + hv, hv),
  };
  const y = gatedDeltaNetMixing(inputs, m.weights, m.geometry, options);
  return project(y, m.out, delta, h);
}

/**
 * h + o_proj(attention(q, k, v) * sigmoid(gate)) with q/k RMSNorm (1 + w folded at load) and RoPE on the first
 * rotaryDim dims of each head (the model's tables are that narrow). q_proj's delta, per head [query | gate], is
 * split onto the query and gate columns of the [q | k | v | gate] projection.
 */
export function gatedAttentionForward(
  x: Tensor,
  h: Tensor,
  m: MixerOf<'gatedAttention'>,
  g: AttentionGeometry,
  tables: TrainingView['rope'],
  delta?: ProjectionDelta,
): Tensor {
  const s = x.shape[0];
  const d = g.headDim;
  const [hq, hkv] = [g.heads * d, g.kvHeads * d];
  const each = parts(m.weights.qkvg).map((w) => linear(x, w.data, undefined, weightScaleOptions(w)));
  const base = each.length === 1 ? each[0] : cat(each, 1);
  const [dq, dk, dv] = [m.q, m.k, m.v].map((site) => delta?.(site, x));
  let proj = base;
  if (dq || dk || dv) {
    const none = (n: number) => zeros([s, n], { device: x.device });
    const [queries, gates] = dq ? siteParts(m.q, dq, 1) : [none(hq), none(hq)];
    proj = base.add(cat([queries, dk ?? none(hkv), dv ?? none(hkv), gates], 1));
  }
  const heads = (start: number, width: number, n: number) => proj.narrow(1, start, width).reshape(s, n, d);
  const q = rope(rmsNorm(heads(0, hq, g.heads), m.weights.qNorm, g.eps), tables.cos, tables.sin, 0);
  const k = rope(rmsNorm(heads(hq, hkv, g.kvHeads), m.weights.kNorm, g.eps), tables.cos, tables.sin, 0);
  const v = heads(hq + hkv, hkv, g.kvHeads);
  const attn = attention(q, k, v, { causal: true, gate: proj.narrow(1, hq + 2 * hkv, hq) }).reshape(s, hq);
  return project(attn, m.o, delta, h);
}
