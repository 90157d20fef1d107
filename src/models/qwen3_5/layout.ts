// The tensors of a Qwen3.5 / Qwen3.5-MoE release checkpoint (Qwen3_5(Moe)ForConditionalGeneration as saved): the text
// model under `model.language_model.`, lm_head at the top, MoE experts fused into 3-D tensors with no `.weight`
// suffix. The single source for the loader's check and the random-checkpoint generator. The vision tower
// (`model.visual.*`) is not part of the text model; the multi-token-prediction layer (`mtp.*`, speculative decoding's
// drafter) is optional.
import type { WeightSpec } from '../random-weights.js';
import type { Qwen35Config } from './config.js';

export const TEXT_PREFIX = 'model.language_model.';

/** Widths of a Gated DeltaNet's projections: q|k|v (conv channels), z, and one a / b per value head. */
export function deltaNetWidths(c: Qwen35Config): { keyDim: number; valueDim: number; convDim: number } {
  const l = c.linear;
  const keyDim = l.numKeyHeads * l.keyHeadDim;
  const valueDim = l.numValueHeads * l.valueHeadDim;
  return { keyDim, valueDim, convDim: 2 * keyDim + valueDim };
}

export function qwen35WeightSpecs(c: Qwen35Config): WeightSpec[] {
  const h = c.hiddenSize;
  const p = TEXT_PREFIX;
  const specs: WeightSpec[] = [{ name: `${p}embed_tokens.weight`, shape: [c.vocabSize, h], role: 'embedding' }];
  for (let i = 0; i < c.numHiddenLayers; i++) specs.push(...qwen35LayerSpecs(c, `${p}layers.${i}`, c.layerTypes[i]));
  specs.push({ name: `${p}norm.weight`, shape: [h], role: 'centered-norm' });
  if (!c.tieWordEmbeddings) specs.push({ name: 'lm_head.weight', shape: [c.vocabSize, h], role: 'lm_head' });
  return specs;
}

/** One decoder layer's tensors under `l` (`model.language_model.layers.N`, or the MTP's `mtp.layers.N`). */
export function qwen35LayerSpecs(c: Qwen35Config, l: string, type: Qwen35Config['layerTypes'][number]): WeightSpec[] {
  const h = c.hiddenSize;
  const specs: WeightSpec[] = [];
  const linear = (name: string, out: number, inp: number, role: WeightSpec['role'] = 'linear') =>
    specs.push({ name: `${name}.weight`, shape: [out, inp], role });
  const { valueDim, convDim } = deltaNetWidths(c);
  specs.push({ name: `${l}.input_layernorm.weight`, shape: [h], role: 'centered-norm' });
  if (type === 'linear_attention') {
    const a = `${l}.linear_attn`;
    const hv = c.linear.numValueHeads;
    linear(`${a}.in_proj_qkv`, convDim, h);
    linear(`${a}.in_proj_z`, valueDim, h);
    linear(`${a}.in_proj_b`, hv, h);
    linear(`${a}.in_proj_a`, hv, h);
    specs.push({ name: `${a}.conv1d.weight`, shape: [convDim, 1, c.linear.convKernel], role: 'conv' });
    specs.push({ name: `${a}.dt_bias`, shape: [hv], role: 'dt-bias' });
    specs.push({ name: `${a}.A_log`, shape: [hv], role: 'a-log' });
    specs.push({ name: `${a}.norm.weight`, shape: [c.linear.valueHeadDim], role: 'float32-norm' });
    linear(`${a}.out_proj`, h, valueDim);
  } else {
    const a = `${l}.self_attn`;
    const d = c.headDim;
    linear(`${a}.q_proj`, 2 * c.numAttentionHeads * d, h);
    linear(`${a}.k_proj`, c.numKeyValueHeads * d, h);
    linear(`${a}.v_proj`, c.numKeyValueHeads * d, h);
    linear(`${a}.o_proj`, h, c.numAttentionHeads * d);
    specs.push({ name: `${a}.q_norm.weight`, shape: [d], role: 'centered-norm' });
    specs.push({ name: `${a}.k_norm.weight`, shape: [d], role: 'centered-norm' });
  }
  specs.push({ name: `${l}.post_attention_layernorm.weight`, shape: [h], role: 'centered-norm' });
  const m = `${l}.mlp`;
  if (c.moe) {
    const { numExperts: e, moeIntermediateSize: im, sharedExpertIntermediateSize: is } = c.moe;
    linear(`${m}.gate`, e, h, 'router');
    specs.push({ name: `${m}.experts.gate_up_proj`, shape: [e, 2 * im, h], role: 'experts' });
    specs.push({ name: `${m}.experts.down_proj`, shape: [e, h, im], role: 'experts' });
    linear(`${m}.shared_expert.gate_proj`, is, h);
    linear(`${m}.shared_expert.up_proj`, is, h);
    linear(`${m}.shared_expert.down_proj`, h, is);
    linear(`${m}.shared_expert_gate`, 1, h, 'router');
  } else {
    linear(`${m}.gate_proj`, c.intermediateSize, h);
    linear(`${m}.up_proj`, c.intermediateSize, h);
    linear(`${m}.down_proj`, h, c.intermediateSize);
  }
  return specs;
}

export const MTP_PREFIX = 'mtp.';

/**
 * The multi-token-prediction module's tensors (vLLM's Qwen3_5MultiTokenPredictor): the zero-centred norms of the
 * next token's embedding and of the target's hidden state, fc [H, 2H] over their concatenation, `layers` full
 * attention decoder layers named as the text model's, and the final norm. The embedding and lm_head are the text
 * model's.
 */
export function qwen35MtpSpecs(c: Qwen35Config, layers = Math.max(1, c.mtpLayers)): WeightSpec[] {
  const h = c.hiddenSize;
  const p = MTP_PREFIX;
  const specs: WeightSpec[] = [
    { name: `${p}pre_fc_norm_embedding.weight`, shape: [h], role: 'centered-norm' },
    { name: `${p}pre_fc_norm_hidden.weight`, shape: [h], role: 'centered-norm' },
    { name: `${p}fc.weight`, shape: [h, 2 * h], role: 'linear' },
  ];
  for (let i = 0; i < layers; i++) specs.push(...qwen35LayerSpecs(c, `${p}layers.${i}`, 'full_attention'));
  specs.push({ name: `${p}norm.weight`, shape: [h], role: 'centered-norm' });
  return specs;
}

/**
 * The tensors of a checkpoint with its experts fused (the release) or stored one by one (each expert's gate / up /
 * down apart, as FP8 checkpoints may: `experts.<e>.gate_proj.weight`, ...).
 */
export function qwen35CheckpointSpecs(c: Qwen35Config, expertsOneByOne: boolean, options: { mtp?: boolean } = {}): WeightSpec[] {
  const specs = [...qwen35WeightSpecs(c), ...(options.mtp ? qwen35MtpSpecs(c) : [])];
  if (!expertsOneByOne || !c.moe) return specs;
  const { numExperts, moeIntermediateSize: im } = c.moe;
  return specs.flatMap((s): WeightSpec[] => {
    if (s.role !== 'experts') return [s];
    const base = s.name.replace(/\.experts\.(gate_up_proj|down_proj)$/, '.experts');
    const h = c.hiddenSize;
    return Array.from({ length: numExperts }, (_, e) =>
      s.name.endsWith('gate_up_proj')
        ? [
            { name: `${base}.${e}.gate_proj.weight`, shape: [im, h], role: 'linear' as const },
            { name: `${base}.${e}.up_proj.weight`, shape: [im, h], role: 'linear' as const },
          ]
        : [{ name: `${base}.${e}.down_proj.weight`, shape: [h, im], role: 'linear' as const }],
    ).flat();
  });
}

/** The layout this checkpoint has: fused experts when it holds the first layer's fused tensor, else one by one. */
export function qwen35CheckpointLayout(ck: { has(name: string): boolean }, c: Qwen35Config): WeightSpec[] {
  return qwen35CheckpointSpecs(c, c.moe !== undefined && !ck.has(`${TEXT_PREFIX}layers.0.mlp.experts.gate_up_proj`));
}
