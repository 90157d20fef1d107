// Qwen3 / Qwen3-MoE for training: its LoRA sites under transformers' module paths
// (model.layers.N.self_attn.{q,k,v,o}_proj, model.layers.N.mlp.{gate,up,down}_proj, the experts'
// model.layers.N.mlp.experts.E.*), PEFT's default targets, and the weights back under their checkpoint names.
import type { Tensor } from '../../core/tensor.js';
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
} from '../layers/training-blocks.js';
import { siteRows, type ProjectionSite } from '../layers/projection-site.js';
import type { Qwen3Blocks } from './blocks.js';

const MLP_NAMES = ['gate_proj', 'up_proj', 'down_proj'] as const;

/** PEFT's defaults: every attention and MLP projection; the attention's alone. */
export const QWEN3_LORA_TARGETS = {
  all: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'],
  mixers: ['q_proj', 'k_proj', 'v_proj', 'o_proj'],
} as const;

interface Qwen3TrainingLayer extends TrainingLayer {
  readonly mixer: AttentionTrainingMixer;
}

export function qwen3TrainingBlocks(blocks: Qwen3Blocks): DecoderTrainingBlocks {
  const w = blocks.weights;
  const layers: Qwen3TrainingLayer[] = w.layers.map((l, i) => {
    const p = `model.layers.${i}`;
    const ff: TrainingFeedForward =
      l.mlp.kind === 'moe'
        ? { kind: 'moe', weights: l.mlp, experts: expertSites(`${p}.mlp`, l.mlp, MLP_NAMES) }
        : denseFeedForward(`${p}.mlp`, l.mlp, MLP_NAMES);
    return { mixerNorm: l.inputNorm, mixer: attentionMixer(`${p}.self_attn`, l.attention, blocks.geometry, 'o_proj'), ffNorm: l.postAttentionNorm, ff };
  });
  return familyTrainingBlocks('qwen3', blocks, layers, QWEN3_LORA_TARGETS, (add, ls) => exportQwen3(add, blocks, ls));
}

function exportQwen3(add: (name: string, t: Tensor) => void, blocks: Qwen3Blocks, layers: readonly Qwen3TrainingLayer[]): void {
  const rows = (s: ProjectionSite) => add(`${s.name}.weight`, siteRows(s));
  add('model.embed_tokens.weight', blocks.embedTokens);
  layers.forEach((l, i) => {
    const p = `model.layers.${i}`;
    add(`${p}.input_layernorm.weight`, l.mixerNorm);
    const m = l.mixer;
    [m.q, m.k, m.v, m.o].forEach(rows);
    add(`${p}.self_attn.q_norm.weight`, m.weights.qNorm);
    add(`${p}.self_attn.k_norm.weight`, m.weights.kNorm);
    add(`${p}.post_attention_layernorm.weight`, l.ffNorm);
    const ff = l.ff;
    if (ff.kind === 'dense') [ff.gate, ff.up, ff.down].forEach(rows);
    else {
      add(`${p}.mlp.gate.weight`, ff.weights.router.data);
      if (ff.weights.selectionBias) add(`${p}.mlp.expert_bias`, ff.weights.selectionBias);
      exportExperts(add, `${p}.mlp`, ff.weights, MLP_NAMES);
    }
  });
  add('model.norm.weight', blocks.norm);
  if (blocks.lmHead.data !== blocks.embedTokens) add('lm_head.weight', blocks.lmHead.data);
}
