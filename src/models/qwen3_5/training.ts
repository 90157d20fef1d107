// Qwen3.5 / Qwen3.5-MoE (Qwen3.6) for training: the LoRA sites under their release module paths
// (model.language_model.layers.N.{linear_attn,self_attn,mlp}.*) over the weights as the loader arranged them, and
// the two mixers' training forwards: the Gated DeltaNet composed from differentiable ops (gated-delta-rule.ts) and
// the gated attention (q/k norm with 1 + w folded, partial RoPE, causal attention times sigmoid(gate)); PEFT's
// default targets, and the weights back in the release layout.
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
import type { Tensor } from '../../core/tensor.js';
import type { Weight } from '../../formats/checkpoint.js';
import { tidy } from '../../core/scope.js';
import { zeros } from '../../ops/creation.js';
import { linear } from '../../ops/matmul.js';
import { attention, rmsNorm, rope } from '../../ops/nn.js';
import { cat } from '../../ops/shape-ops.js';
import { weightScaleOptions, type AttentionGeometry } from '../layers/blocks.js';
import { projectSite, projectSites, site, siteParts, siteRows, type ProjectionDelta, type ProjectionSite } from '../layers/projection-site.js';
import {
  denseFeedForward,
  denseSites,
  expertAt,
  expertSites,
  familyTrainingBlocks,
  type DecoderTrainingBlocks,
  type MoeTrainingFeedForward,
  type TrainingContext,
  type TrainingFeedForward,
  type TrainingLayer,
  type TrainingMixer,
} from '../layers/training-blocks.js';
import type { Qwen35Blocks } from './blocks.js';
import type { Qwen35Config } from './config.js';
import { gatedDeltaNetMixing, type DeltaNetMixing } from './gated-delta-rule.js';
import { deltaNetWidths, TEXT_PREFIX } from './layout.js';
import type { DeltaNetWeights, GatedAttentionWeights, Qwen35MoeWeights } from './weights.js';

const MLP_NAMES = ['gate_proj', 'up_proj', 'down_proj'] as const;

/**
 * PEFT's defaults: every attention, DeltaNet and MLP projection (the DeltaNet's b and a, one row per value head,
 * only when named); the attention and DeltaNet projections alone, with the MoE's shared expert beside them.
 */
export const QWEN3_5_LORA_TARGETS = {
  all: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'in_proj_qkv', 'in_proj_z', 'out_proj', 'gate_proj', 'up_proj', 'down_proj'],
  mixers: [
    'q_proj',
    'k_proj',
    'v_proj',
    'o_proj',
    'in_proj_qkv',
    'in_proj_z',
    'out_proj',
    'shared_expert.gate_proj',
    'shared_expert.up_proj',
    'shared_expert.down_proj',
  ],
} as const;

/** The Gated DeltaNet: its [qkv | z | b | a] projection's four sites and out_proj. */
export interface DeltaNetTrainingMixer extends TrainingMixer {
  readonly kind: 'deltaNet';
  readonly weights: DeltaNetWeights;
  readonly geometry: DeltaNetMixing & { readonly convKernel: number };
  readonly qkv: ProjectionSite;
  readonly z: ProjectionSite;
  readonly b: ProjectionSite;
  readonly a: ProjectionSite;
  readonly out: ProjectionSite;
}

/** The gated attention: q_proj (its queries and gates), k_proj, v_proj, o_proj. */
export interface GatedAttentionTrainingMixer extends TrainingMixer {
  readonly kind: 'gatedAttention';
  readonly weights: GatedAttentionWeights;
  readonly geometry: AttentionGeometry;
  readonly q: ProjectionSite;
  readonly k: ProjectionSite;
  readonly v: ProjectionSite;
  readonly o: ProjectionSite;
}

interface Qwen35TrainingLayer extends TrainingLayer {
  readonly mixer: DeltaNetTrainingMixer | GatedAttentionTrainingMixer;
}

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

function deltaNetMixer(prefix: string, m: DeltaNetWeights, c: Qwen35Config): DeltaNetTrainingMixer {
  const { valueDim, convDim } = deltaNetWidths(c);
  const l = c.linear;
  const hv = l.numValueHeads;
  const [qkv, z, b, a] = stackedSites(prefix, m.inProj, ['in_proj_qkv', 'in_proj_z', 'in_proj_b', 'in_proj_a'], [convDim, valueDim, hv, hv]);
  const geometry = { keyHeads: l.numKeyHeads, valueHeads: hv, keyDim: l.keyHeadDim, valueDim: l.valueHeadDim, convKernel: l.convKernel, eps: c.rmsNormEps };
  const out = site(`${prefix}.out_proj`, m.outProj, 0, m.outProj.data.shape[0]);
  const mixer: DeltaNetTrainingMixer = {
    kind: 'deltaNet',
    weights: m,
    geometry,
    qkv,
    z,
    b,
    a,
    out,
    sites: [qkv, z, b, a, out],
    forward: (x, h, { delta, options }) => deltaNetForward(x, h, mixer, delta, { chunk: options.deltaRuleChunk, recurrent: options.deltaRuleRecurrent }),
  };
  return mixer;
}

function gatedAttentionMixer(prefix: string, m: GatedAttentionWeights, c: Qwen35Config): GatedAttentionTrainingMixer {
  const d = c.headDim;
  const [hq, hkv] = [c.numAttentionHeads * d, c.numKeyValueHeads * d];
  const [queries, k, v, gates] = stackedSites(prefix, m.qkvg, ['q_proj', 'k_proj', 'v_proj', 'q_proj'], [hq, hkv, hkv, hq]);
  const q: ProjectionSite = {
    ...site(`${prefix}.q_proj`, queries.weight, queries.rowOffset, 2 * hq),
    interleaved: { heads: c.numAttentionHeads, width: d, parts: [queries, gates].map((s) => ({ weight: s.weight, rowOffset: s.rowOffset })) },
  };
  const o = site(`${prefix}.o_proj`, m.o, 0, m.o.data.shape[0]);
  const geometry = { heads: c.numAttentionHeads, kvHeads: c.numKeyValueHeads, headDim: d, eps: c.rmsNormEps };
  const mixer: GatedAttentionTrainingMixer = {
    kind: 'gatedAttention',
    weights: m,
    geometry,
    q,
    k,
    v,
    o,
    sites: [q, k, v, o],
    forward: (x, h, { rope, delta }) => gatedAttentionForward(x, h, mixer, rope, delta),
  };
  return mixer;
}

/** The routed experts' sites, and the shared expert's whether the loader stacked it as expert E or kept it beside. */
function moeFeedForward(prefix: string, m: Qwen35MoeWeights, experts: number): MoeTrainingFeedForward {
  const shared = m.sharedInStack
    ? { ...expertAt(`${prefix}.shared_expert`, m, MLP_NAMES, experts), expert: experts }
    : m.shared
      ? denseSites(`${prefix}.shared_expert`, m.shared.mlp, MLP_NAMES)
      : undefined;
  return { kind: 'moe', weights: m, experts: expertSites(prefix, m, MLP_NAMES, experts), shared };
}

/** h + out_proj(gated norm(delta rule(conv(qkv)))) from the [qkv | z | b | a] projection, every piece differentiable. */
export function deltaNetForward(
  x: Tensor,
  h: Tensor,
  m: DeltaNetTrainingMixer,
  delta: ProjectionDelta | undefined,
  options: { chunk?: number; recurrent?: boolean },
): Tensor {
  const proj = projectSites(x, [m.qkv, m.z, m.b, m.a], delta);
  const [convDim, valueWidth, hv] = [m.qkv.outFeatures, m.z.outFeatures, m.b.outFeatures];
  const inputs = {
    qkv: proj.narrow(1, 0, convDim),
    z: proj.narrow(1, convDim, valueWidth),
    b: proj.narrow(1, convDim + valueWidth, hv),
    a: proj.narrow(1, convDim + valueWidth + hv, hv),
  };
  const y = gatedDeltaNetMixing(inputs, m.weights, m.geometry, options);
  return projectSite(y, m.out, delta, h);
}

/**
 * h + o_proj(attention(q, k, v) * sigmoid(gate)) with q/k RMSNorm (1 + w folded at load) and RoPE on the first
 * rotaryDim dims of each head (the model's tables are that narrow). q_proj's delta, per head [query | gate], is
 * split onto the query and gate columns of the [q | k | v | gate] projection.
 */
export function gatedAttentionForward(x: Tensor, h: Tensor, m: GatedAttentionTrainingMixer, tables: TrainingContext['rope'], delta?: ProjectionDelta): Tensor {
  const g = m.geometry;
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
  return projectSite(attn, m.o, delta, h);
}

export function qwen35TrainingBlocks(blocks: Qwen35Blocks): DecoderTrainingBlocks {
  const c = blocks.config;
  const w = blocks.weights;
  const layers: Qwen35TrainingLayer[] = w.layers.map((l, i) => {
    const p = `${TEXT_PREFIX}layers.${i}`;
    const mixer = l.mixer.kind === 'linear_attention' ? deltaNetMixer(`${p}.linear_attn`, l.mixer, c) : gatedAttentionMixer(`${p}.self_attn`, l.mixer, c);
    const ff: TrainingFeedForward =
      l.mlp.kind === 'moe' ? moeFeedForward(`${p}.mlp`, l.mlp as Qwen35MoeWeights, c.moe!.numExperts) : denseFeedForward(`${p}.mlp`, l.mlp, MLP_NAMES);
    return { mixerNorm: l.inputNorm, mixer, ffNorm: l.postNorm, ff };
  });
  return familyTrainingBlocks('qwen3_5', blocks, layers, QWEN3_5_LORA_TARGETS, (add, ls) => exportQwen35(add, blocks, ls));
}

/** Qwen3.5 / Qwen3.5-MoE in the release layout (model.language_model., fused 3-D experts). */
function exportQwen35(add: (name: string, t: Tensor) => void, blocks: Qwen35Blocks, layers: readonly Qwen35TrainingLayer[]): void {
  const rows = (s: ProjectionSite) => add(`${s.name}.weight`, siteRows(s));
  // The zero-centred norms are kept as 1 + w.
  const centred = (name: string, t: Tensor) => {
    const w = tidy(() => t.sub(1));
    add(name, w);
    w.dispose(); // add kept its own view
  };
  add(`${TEXT_PREFIX}embed_tokens.weight`, blocks.embedTokens);
  layers.forEach((l, i) => {
    const p = `${TEXT_PREFIX}layers.${i}`;
    centred(`${p}.input_layernorm.weight`, l.mixerNorm);
    const m = l.mixer;
    if (m.kind === 'deltaNet') {
      const w = m.weights;
      [m.qkv, m.z, m.b, m.a].forEach(rows);
      add(`${p}.linear_attn.conv1d.weight`, w.conv.reshape(w.conv.shape[0], 1, w.conv.shape[1]));
      add(`${p}.linear_attn.dt_bias`, w.dtBias);
      add(`${p}.linear_attn.A_log`, w.aLog);
      add(`${p}.linear_attn.norm.weight`, w.norm);
      rows(m.out);
    } else {
      [m.q, m.k, m.v, m.o].forEach(rows);
      centred(`${p}.self_attn.q_norm.weight`, m.weights.qNorm);
      centred(`${p}.self_attn.k_norm.weight`, m.weights.kNorm);
    }
    centred(`${p}.post_attention_layernorm.weight`, l.ffNorm);
    const ff = l.ff;
    if (ff.kind === 'dense') [ff.gate, ff.up, ff.down].forEach(rows);
    else {
      const f = `${p}.mlp`;
      const w = ff.weights;
      const e = ff.experts.length;
      add(`${f}.gate.weight`, w.router.data.narrow(0, 0, e));
      add(`${f}.experts.gate_up_proj`, w.gateUp.data.narrow(0, 0, e));
      add(`${f}.experts.down_proj`, w.down.data.narrow(0, 0, e));
      const shared = ff.shared;
      if (shared) {
        [shared.gate, shared.up, shared.down].forEach(rows);
        add(`${f}.shared_expert_gate.weight`, shared.expert === undefined ? w.shared!.gate.data : w.router.data.narrow(0, shared.expert, 1));
      }
    }
  });
  centred(`${TEXT_PREFIX}norm.weight`, blocks.norm);
  if (blocks.lmHead.data !== blocks.embedTokens) add('lm_head.weight', blocks.lmHead.data);
}
