// The tensors of an LFM2 / LFM2-MoE checkpoint in Hugging Face's naming (Lfm2ForCausalLM / Lfm2MoeForCausalLM
// state dicts as saved, experts one by one): the single source for the loader and the random-checkpoint generator.
import { isLfm2MoeLayer, type Lfm2Config } from './config.js';
import type { WeightSpec } from '../random-weights.js';

export function lfm2WeightSpecs(c: Lfm2Config): WeightSpec[] {
  const h = c.hiddenSize;
  const q = c.numAttentionHeads * c.headDim;
  const kv = c.numKeyValueHeads * c.headDim;
  const specs: WeightSpec[] = [{ name: 'model.embed_tokens.weight', shape: [c.vocabSize, h], role: 'embedding' }];
  const linear = (name: string, out: number, inp: number, bias = false) => {
    specs.push({ name: `${name}.weight`, shape: [out, inp], role: 'linear' });
    if (bias) specs.push({ name: `${name}.bias`, shape: [out], role: 'bias' });
  };
  for (let i = 0; i < c.numHiddenLayers; i++) {
    const p = `model.layers.${i}`;
    specs.push({ name: `${p}.operator_norm.weight`, shape: [h], role: 'norm' });
    if (c.layerTypes[i] === 'conv') {
      linear(`${p}.conv.in_proj`, 3 * h, h, c.convBias);
      specs.push({ name: `${p}.conv.conv.weight`, shape: [h, 1, c.convLCache], role: 'conv' });
      if (c.convBias) specs.push({ name: `${p}.conv.conv.bias`, shape: [h], role: 'bias' });
      linear(`${p}.conv.out_proj`, h, h, c.convBias);
    } else {
      const a = `${p}.self_attn`;
      linear(`${a}.q_proj`, q, h);
      linear(`${a}.k_proj`, kv, h);
      linear(`${a}.v_proj`, kv, h);
      linear(`${a}.out_proj`, h, q);
      specs.push({ name: `${a}.q_layernorm.weight`, shape: [c.headDim], role: 'norm' });
      specs.push({ name: `${a}.k_layernorm.weight`, shape: [c.headDim], role: 'norm' });
    }
    specs.push({ name: `${p}.ffn_norm.weight`, shape: [h], role: 'norm' });
    const ff = `${p}.feed_forward`;
    if (c.moe && isLfm2MoeLayer(c, i)) {
      specs.push({ name: `${ff}.gate.weight`, shape: [c.moe.numExperts, h], role: 'router' });
      if (c.moe.useExpertBias) specs.push({ name: `${ff}.expert_bias`, shape: [c.moe.numExperts], role: 'selection-bias' });
      for (let e = 0; e < c.moe.numExperts; e++) {
        const x = `${ff}.experts.${e}`;
        linear(`${x}.w1`, c.moe.moeIntermediateSize, h);
        linear(`${x}.w3`, c.moe.moeIntermediateSize, h);
        linear(`${x}.w2`, h, c.moe.moeIntermediateSize);
      }
    } else {
      linear(`${ff}.w1`, c.intermediateSize, h);
      linear(`${ff}.w3`, c.intermediateSize, h);
      linear(`${ff}.w2`, h, c.intermediateSize);
    }
  }
  specs.push({ name: 'model.embedding_norm.weight', shape: [h], role: 'norm' });
  if (!c.tieWordEmbeddings) specs.push({ name: 'lm_head.weight', shape: [c.vocabSize, h], role: 'lm_head' });
  return specs;
}
