// LFM2 / LFM2-MoE for training: the gated short conv composed from differentiable ops over the whole sequence, the
// LoRA sites under transformers' module paths (model.layers.N.conv.{in,out}_proj, self_attn.{q,k,v}_proj and
// out_proj, feed_forward.{w1,w3,w2} and feed_forward.experts.E.*), PEFT's default targets, and the weights back
// under their checkpoint names.
import type { Tensor } from '../../core/tensor.js';
import { float32 } from '../../ops/grad-rules.js';
import { zeros } from '../../ops/creation.js';
import { cat } from '../../ops/shape-ops.js';
import { projectSite, site, siteRows, type ProjectionDelta, type ProjectionSite } from '../layers/projection-site.js';
import {
  attentionMixer,
  denseFeedForward,
  expertSites,
  exportExperts,
  familyTrainingBlocks,
  type AttentionTrainingMixer,
  type DecoderTrainingBlocks,
  type TrainingFeedForward,
  type TrainingLayer,
  type TrainingMixer,
} from '../layers/training-blocks.js';
import type { Lfm2Blocks } from './blocks.js';
import type { ShortConvWeights } from './weights.js';

/** w1 is the gate, w3 the up, w2 the down projection. */
const FF_NAMES = ['w1', 'w3', 'w2'] as const;

/** PEFT's defaults: every conv, attention and feed-forward projection; the conv and attention ones alone. */
export const LFM2_LORA_TARGETS = {
  all: ['q_proj', 'k_proj', 'v_proj', 'out_proj', 'in_proj', 'w1', 'w2', 'w3'],
  mixers: ['q_proj', 'k_proj', 'v_proj', 'out_proj', 'in_proj'],
} as const;

export interface ConvTrainingMixer extends TrainingMixer {
  readonly kind: 'conv';
  readonly weights: ShortConvWeights;
  readonly inProj: ProjectionSite;
  readonly outProj: ProjectionSite;
}

interface Lfm2TrainingLayer extends TrainingLayer {
  readonly mixer: AttentionTrainingMixer | ConvTrainingMixer;
}

function convMixer(prefix: string, cw: ShortConvWeights): ConvTrainingMixer {
  const inProj = site(`${prefix}.in_proj`, cw.inProj, 0, cw.inProj.data.shape[0]);
  const outProj = site(`${prefix}.out_proj`, cw.outProj, 0, cw.outProj.data.shape[0]);
  return { kind: 'conv', weights: cw, inProj, outProj, sites: [inProj, outProj], forward: (x, h, c) => convForward(x, h, cw, inProj, outProj, c.delta) };
}

/** LFM2's gated short conv over the whole sequence from zeros: C * (causal depthwise conv of B * x + bias). */
function convForward(x: Tensor, h: Tensor, cw: ShortConvWeights, inProj: ProjectionSite, outProj: ProjectionSite, delta?: ProjectionDelta): Tensor {
  const [s, width] = [x.shape[0], h.shape[1]];
  const bcx = projectSite(x, inProj, delta, undefined, cw.inBias);
  const bx = bcx.narrow(1, 0, width).mul(bcx.narrow(1, 2 * width, width));
  const taps = float32(cw.taps);
  const l = taps.shape[1];
  const padded = l > 1 ? cat([zeros([l - 1, width], { device: x.device }), bx], 0) : bx;
  // Tap j reads the token l - 1 - j steps back; the last tap is on the current token.
  let conv = padded.narrow(0, 0, s).mul(taps.narrow(1, 0, 1).reshape(width));
  for (let j = 1; j < l; j++) conv = conv.add(padded.narrow(0, j, s).mul(taps.narrow(1, j, 1).reshape(width)));
  if (cw.tapsBias) conv = conv.add(float32(cw.tapsBias));
  return projectSite(bcx.narrow(1, width, width).mul(conv), outProj, delta, h, cw.outBias);
}

export function lfm2TrainingBlocks(blocks: Lfm2Blocks): DecoderTrainingBlocks {
  const w = blocks.weights;
  const layers: Lfm2TrainingLayer[] = w.layers.map((l, i) => {
    const p = `model.layers.${i}`;
    const mixer = l.op.kind === 'attention' ? attentionMixer(`${p}.self_attn`, l.op.attention, blocks.geometry, 'out_proj') : convMixer(`${p}.conv`, l.op.conv);
    const f = l.feedForward;
    const ff: TrainingFeedForward =
      f.kind === 'moe'
        ? { kind: 'moe', weights: f, experts: expertSites(`${p}.feed_forward`, f, FF_NAMES) }
        : denseFeedForward(`${p}.feed_forward`, f, FF_NAMES);
    return { mixerNorm: l.operatorNorm, mixer, ffNorm: l.ffnNorm, ff };
  });
  return familyTrainingBlocks('lfm2', blocks, layers, LFM2_LORA_TARGETS, (add, ls) => exportLfm2(add, blocks, ls));
}

function exportLfm2(add: (name: string, t: Tensor) => void, blocks: Lfm2Blocks, layers: readonly Lfm2TrainingLayer[]): void {
  const rows = (s: ProjectionSite) => add(`${s.name}.weight`, siteRows(s));
  add('model.embed_tokens.weight', blocks.embedTokens);
  layers.forEach((l, i) => {
    const p = `model.layers.${i}`;
    add(`${p}.operator_norm.weight`, l.mixerNorm);
    const m = l.mixer;
    if (m.kind === 'attention') {
      [m.q, m.k, m.v, m.o].forEach(rows);
      add(`${p}.self_attn.q_layernorm.weight`, m.weights.qNorm);
      add(`${p}.self_attn.k_layernorm.weight`, m.weights.kNorm);
    } else {
      const c = m.weights;
      rows(m.inProj);
      if (c.inBias) add(`${p}.conv.in_proj.bias`, c.inBias);
      add(`${p}.conv.conv.weight`, c.taps.reshape(c.taps.shape[0], 1, c.taps.shape[1]));
      if (c.tapsBias) add(`${p}.conv.conv.bias`, c.tapsBias);
      rows(m.outProj);
      if (c.outBias) add(`${p}.conv.out_proj.bias`, c.outBias);
    }
    add(`${p}.ffn_norm.weight`, l.ffNorm);
    const ff = l.ff;
    if (ff.kind === 'dense') [ff.gate, ff.up, ff.down].forEach(rows);
    else {
      add(`${p}.feed_forward.gate.weight`, ff.weights.router.data);
      if (ff.weights.selectionBias) add(`${p}.feed_forward.expert_bias`, ff.weights.selectionBias);
      exportExperts(add, `${p}.feed_forward`, ff.weights, FF_NAMES);
    }
  });
  add('model.embedding_norm.weight', blocks.norm);
  if (blocks.lmHead.data !== blocks.embedTokens) add('lm_head.weight', blocks.lmHead.data);
}
