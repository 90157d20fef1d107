// The tensors of a Qwen3 / Qwen3-MoE checkpoint in Hugging Face's naming (Qwen3ForCausalLM /
// Qwen3MoeForCausalLM state dicts): the single source for the loader and the random-checkpoint generator.
import { isMoeLayer, type Qwen3Config } from './config.js';

import type { WeightSpec } from '../random-weights.js';

export type { WeightSpec };

/** Every tensor of the checkpoint, in state-dict order. Linear names end in `.weight`; biases follow their weight. */
export function qwen3WeightSpecs(c: Qwen3Config): WeightSpec[] {
  const h = c.hiddenSize;
  const q = c.numAttentionHeads * c.headDim;
  const kv = c.numKeyValueHeads * c.headDim;
  const specs: WeightSpec[] = [{ name: 'model.embed_tokens.weight', shape: [c.vocabSize, h], role: 'embedding' }];
  const linear = (name: string, out: number, inp: number) => {
    specs.push({ name: `${name}.weight`, shape: [out, inp], role: 'linear' });
  };
  for (let i = 0; i < c.numHiddenLayers; i++) {
    const p = `model.layers.${i}`;
    specs.push({ name: `${p}.input_layernorm.weight`, shape: [h], role: 'norm' });
    for (const [proj, out] of [
      ['q_proj', q],
      ['k_proj', kv],
      ['v_proj', kv],
    ] as const) {
      linear(`${p}.self_attn.${proj}`, out, h);
      if (c.attentionBias) specs.push({ name: `${p}.self_attn.${proj}.bias`, shape: [out], role: 'bias' });
    }
    linear(`${p}.self_attn.o_proj`, h, q);
    if (c.attentionBias) specs.push({ name: `${p}.self_attn.o_proj.bias`, shape: [h], role: 'bias' });
    specs.push({ name: `${p}.self_attn.q_norm.weight`, shape: [c.headDim], role: 'norm' });
    specs.push({ name: `${p}.self_attn.k_norm.weight`, shape: [c.headDim], role: 'norm' });
    specs.push({ name: `${p}.post_attention_layernorm.weight`, shape: [h], role: 'norm' });
    if (c.moe && isMoeLayer(c, i)) {
      specs.push({ name: `${p}.mlp.gate.weight`, shape: [c.moe.numExperts, h], role: 'router' });
      for (let e = 0; e < c.moe.numExperts; e++) {
        const x = `${p}.mlp.experts.${e}`;
        linear(`${x}.gate_proj`, c.moe.moeIntermediateSize, h);
        linear(`${x}.up_proj`, c.moe.moeIntermediateSize, h);
        linear(`${x}.down_proj`, h, c.moe.moeIntermediateSize);
      }
    } else {
      linear(`${p}.mlp.gate_proj`, c.intermediateSize, h);
      linear(`${p}.mlp.up_proj`, c.intermediateSize, h);
      linear(`${p}.mlp.down_proj`, h, c.intermediateSize);
    }
  }
  specs.push({ name: 'model.norm.weight', shape: [h], role: 'norm' });
  if (!c.tieWordEmbeddings) specs.push({ name: 'lm_head.weight', shape: [c.vocabSize, h], role: 'lm_head' });
  return specs;
}
