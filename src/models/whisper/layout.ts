// The tensors of a Whisper checkpoint in transformers' naming (WhisperForConditionalGeneration's state dict as
// saved): the single source for the loader and the random-checkpoint generator. k_proj has no bias (as in OpenAI's
// original code); proj_out.weight is tied to model.decoder.embed_tokens.weight and not stored when tied.
import type { WeightSpec } from '../random-weights.js';
import type { WhisperConfig } from './config.js';

export function whisperWeightSpecs(c: WhisperConfig): WeightSpec[] {
  const d = c.dModel;
  const specs: WeightSpec[] = [];
  const linear = (name: string, out: number, inp: number, bias = true) => {
    specs.push({ name: `${name}.weight`, shape: [out, inp], role: 'linear' });
    if (bias) specs.push({ name: `${name}.bias`, shape: [out], role: 'bias' });
  };
  const layerNorm = (name: string) => {
    specs.push({ name: `${name}.weight`, shape: [d], role: 'norm' });
    specs.push({ name: `${name}.bias`, shape: [d], role: 'bias' });
  };
  const attention = (p: string) => {
    linear(`${p}.q_proj`, d, d);
    linear(`${p}.k_proj`, d, d, false);
    linear(`${p}.v_proj`, d, d);
    linear(`${p}.out_proj`, d, d);
  };
  const e = 'model.encoder';
  specs.push({ name: `${e}.conv1.weight`, shape: [d, c.numMelBins, 3], role: 'conv' });
  specs.push({ name: `${e}.conv1.bias`, shape: [d], role: 'bias' });
  specs.push({ name: `${e}.conv2.weight`, shape: [d, d, 3], role: 'conv' });
  specs.push({ name: `${e}.conv2.bias`, shape: [d], role: 'bias' });
  specs.push({ name: `${e}.embed_positions.weight`, shape: [c.maxSourcePositions, d], role: 'bias' });
  for (let i = 0; i < c.encoderLayers; i++) {
    const p = `${e}.layers.${i}`;
    attention(`${p}.self_attn`);
    layerNorm(`${p}.self_attn_layer_norm`);
    linear(`${p}.fc1`, c.encoderFfnDim, d);
    linear(`${p}.fc2`, d, c.encoderFfnDim);
    layerNorm(`${p}.final_layer_norm`);
  }
  layerNorm(`${e}.layer_norm`);
  const dec = 'model.decoder';
  specs.push({ name: `${dec}.embed_tokens.weight`, shape: [c.vocabSize, d], role: 'embedding' });
  specs.push({ name: `${dec}.embed_positions.weight`, shape: [c.maxTargetPositions, d], role: 'bias' });
  for (let i = 0; i < c.decoderLayers; i++) {
    const p = `${dec}.layers.${i}`;
    attention(`${p}.self_attn`);
    layerNorm(`${p}.self_attn_layer_norm`);
    attention(`${p}.encoder_attn`);
    layerNorm(`${p}.encoder_attn_layer_norm`);
    linear(`${p}.fc1`, c.decoderFfnDim, d);
    linear(`${p}.fc2`, d, c.decoderFfnDim);
    layerNorm(`${p}.final_layer_norm`);
  }
  layerNorm(`${dec}.layer_norm`);
  if (!c.tieWordEmbeddings) specs.push({ name: 'proj_out.weight', shape: [c.vocabSize, d], role: 'lm_head' });
  return specs;
}
