// config.json of Qwen3.5 / Qwen3.6 (transformers' Qwen3_5Config / Qwen3_5MoeConfig): a vision-language release whose
// text model's fields sit under `text_config` (a text-only config with them at the top level is read the same way).
// Each layer is a Gated DeltaNet ('linear_attention') or a gated full attention ('full_attention'), followed by a
// dense SwiGLU MLP (qwen3_5) or a routed MoE with one shared expert (qwen3_5_moe). Every field is checked and an
// error names the file and the field; the defaults are transformers' Qwen3_5(Moe)TextConfig's.
import { parseDType, type DType } from '../../core/dtype.js';
import { CheckpointError } from '../../core/errors.js';
import { Fields, type Json } from '../../formats/config-fields.js';
import { parseQuantization, quantizationToHf, type Fp8QuantizationConfig } from '../qwen3/config.js';
import { GATED_DELTA_NET_MAX_CONV_KERNEL, GATED_DELTA_NET_MAX_KEY_DIM } from '../../ops/gated-delta-net.js';

export type Qwen35LayerType = 'linear_attention' | 'full_attention';
export const QWEN3_5_MODEL_TYPES = ['qwen3_5', 'qwen3_5_moe'] as const;

/** The Gated DeltaNet's geometry. */
export interface GatedDeltaNetConfig {
  readonly numKeyHeads: number;
  readonly numValueHeads: number;
  readonly keyHeadDim: number;
  readonly valueHeadDim: number;
  /** Taps of the causal depthwise conv over q|k|v (linear_conv_kernel_dim). */
  readonly convKernel: number;
}

export interface Qwen35MoeConfig {
  readonly numExperts: number;
  readonly numExpertsPerTok: number;
  readonly moeIntermediateSize: number;
  readonly sharedExpertIntermediateSize: number;
}

export interface Qwen35Config {
  readonly modelType: 'qwen3_5' | 'qwen3_5_moe';
  readonly vocabSize: number;
  readonly hiddenSize: number;
  /** The dense MLP's width (qwen3_5). */
  readonly intermediateSize: number;
  readonly numHiddenLayers: number;
  readonly layerTypes: readonly Qwen35LayerType[];
  readonly numAttentionHeads: number;
  readonly numKeyValueHeads: number;
  readonly headDim: number;
  /** Dims of each head that RoPE rotates: int(headDim * partial_rotary_factor), even. */
  readonly rotaryDim: number;
  readonly ropeTheta: number;
  /** mrope_section of rope_parameters, kept for the saved config (text positions reduce it to plain RoPE). */
  readonly mropeSection?: readonly number[];
  readonly rmsNormEps: number;
  readonly maxPositionEmbeddings: number;
  readonly tieWordEmbeddings: boolean;
  readonly linear: GatedDeltaNetConfig;
  readonly torchDtype?: DType;
  readonly bosTokenId?: number;
  readonly eosTokenIds: readonly number[];
  /** Present for qwen3_5_moe: every layer's feed-forward is the MoE block. */
  readonly moe?: Qwen35MoeConfig;
  readonly quantization?: Fp8QuantizationConfig;
  /** Multi-token-prediction layers the checkpoint carries (mtp.*; not loaded). */
  readonly mtpLayers: number;
  /** Whether config.json describes a vision tower (model.visual.*; not loaded). */
  readonly hasVision: boolean;
}

const asObject = (json: unknown, file: string): Json => {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new CheckpointError('config is not a JSON object', { file });
  return json as Json;
};

function dtypeOf(f: Fields): DType | undefined {
  const key = f.has('torch_dtype') ? 'torch_dtype' : f.has('dtype') ? 'dtype' : undefined;
  if (!key) return undefined;
  try {
    return parseDType(f.string(key));
  } catch {
    return undefined; // informative only: the safetensors headers say what each tensor is
  }
}

export function parseQwen35Config(json: unknown, file = 'config.json'): Qwen35Config {
  const top = new Fields(asObject(json, file), file);
  const modelType = top.string('model_type');
  if (modelType !== 'qwen3_5' && modelType !== 'qwen3_5_moe')
    throw new CheckpointError(`model_type '${modelType}' is not a Qwen3.5 config (expected ${QWEN3_5_MODEL_TYPES.join(' or ')})`, { file });
  // The release nests the text model's fields; a text-only config has them at the top.
  if (!top.has('text_config') && !top.has('hidden_size') && top.has('vision_config')) {
    throw new CheckpointError('config.json has a vision_config but no text_config: tensorgpu runs the text model of Qwen3.5 / Qwen3.6', { file });
  }
  const f = top.object('text_config') ?? top;
  const act = f.string('hidden_act', 'silu');
  if (act !== 'silu') f.fail('hidden_act', "'silu'");
  const hiddenSize = f.int('hidden_size');
  const numHiddenLayers = f.int('num_hidden_layers');
  const numAttentionHeads = f.int('num_attention_heads');
  const numKeyValueHeads = f.int('num_key_value_heads', numAttentionHeads);
  if (numAttentionHeads % numKeyValueHeads !== 0) f.fail('num_key_value_heads', `a divisor of num_attention_heads (${numAttentionHeads})`);
  const headDim = f.int('head_dim', Math.floor(hiddenSize / numAttentionHeads));

  let layerTypes: Qwen35LayerType[];
  if (f.has('layer_types')) {
    const raw = f.raw().layer_types;
    if (Array.isArray(raw)) {
      const unknown = raw.findIndex((t) => t !== 'linear_attention' && t !== 'full_attention');
      if (unknown >= 0)
        throw new CheckpointError(
          `${f === top ? '' : 'text_config.'}layer_types[${unknown}] is ${JSON.stringify(raw[unknown])}; this family runs 'linear_attention' and 'full_attention' layers`,
          { file },
        );
    }
    layerTypes = f.strings('layer_types', ['linear_attention', 'full_attention'] as const);
    if (layerTypes.length !== numHiddenLayers) f.fail('layer_types', `a list of num_hidden_layers (${numHiddenLayers}) entries (it has ${layerTypes.length})`);
  } else {
    const interval = f.int('full_attention_interval', 4);
    layerTypes = Array.from({ length: numHiddenLayers }, (_, i) => ((i + 1) % interval === 0 ? 'full_attention' : 'linear_attention'));
  }
  if (!f.bool('attn_output_gate', true)) f.fail('attn_output_gate', 'true (the released models gate their attention output)');
  if (f.bool('attention_bias', false)) f.fail('attention_bias', 'false');

  const rope = f.object('rope_parameters') ?? f.object('rope_scaling');
  const ropeType = rope?.string('rope_type', 'default') ?? 'default';
  if (ropeType !== 'default') rope!.fail('rope_type', "'default' (text positions)");
  const ropeTheta = rope?.has('rope_theta') ? rope.positive('rope_theta') : f.positive('rope_theta', 10_000);
  const partial = rope?.has('partial_rotary_factor') ? rope.positive('partial_rotary_factor') : f.positive('partial_rotary_factor', 0.25);
  const rotaryDim = Math.floor(headDim * partial);
  if (rotaryDim < 2 || rotaryDim % 2 !== 0 || rotaryDim > headDim)
    (rope ?? f).fail('partial_rotary_factor', `a fraction of head_dim (${headDim}) giving an even rotary dim (got ${rotaryDim})`);
  const mropeSection = rope?.has('mrope_section') ? rope.ints('mrope_section') : undefined;

  const linear: GatedDeltaNetConfig = {
    numKeyHeads: f.int('linear_num_key_heads', 16),
    numValueHeads: f.int('linear_num_value_heads', 32),
    keyHeadDim: f.int('linear_key_head_dim', 128),
    valueHeadDim: f.int('linear_value_head_dim', 128),
    convKernel: f.int('linear_conv_kernel_dim', 4),
  };
  if (linear.numValueHeads % linear.numKeyHeads !== 0) f.fail('linear_num_value_heads', `a multiple of linear_num_key_heads (${linear.numKeyHeads})`);
  if (linear.keyHeadDim > GATED_DELTA_NET_MAX_KEY_DIM) f.fail('linear_key_head_dim', `at most ${GATED_DELTA_NET_MAX_KEY_DIM}`);
  if (linear.convKernel > GATED_DELTA_NET_MAX_CONV_KERNEL) f.fail('linear_conv_kernel_dim', `at most ${GATED_DELTA_NET_MAX_CONV_KERNEL}`);

  const vocabSize = f.int('vocab_size', 248320);
  let moe: Qwen35MoeConfig | undefined;
  if (modelType === 'qwen3_5_moe') {
    const numExperts = f.int('num_experts');
    const numExpertsPerTok = f.int('num_experts_per_tok');
    if (numExpertsPerTok > numExperts) f.fail('num_experts_per_tok', `at most num_experts (${numExperts})`);
    const moeIntermediateSize = f.int('moe_intermediate_size');
    moe = { numExperts, numExpertsPerTok, moeIntermediateSize, sharedExpertIntermediateSize: f.int('shared_expert_intermediate_size', moeIntermediateSize) };
  }
  const eos = f.has('eos_token_id') ? f.ints('eos_token_id') : top.ints('eos_token_id');
  const eosTokenIds = eos.length ? eos : [248044];
  const bos = f.has('bos_token_id') ? f.int('bos_token_id', undefined, 0) : undefined;
  for (const id of eosTokenIds) if (id >= vocabSize) f.fail('eos_token_id', `below vocab_size ${vocabSize}`);
  // tie_word_embeddings: the top-level config's (the composite model's), else the text config's, default false.
  const tie = top.has('tie_word_embeddings') ? top.bool('tie_word_embeddings', false) : f.bool('tie_word_embeddings', false);
  const quantization = parseQuantization(top.object('quantization_config') ?? f.object('quantization_config'), file);
  return {
    modelType,
    vocabSize,
    hiddenSize,
    intermediateSize: modelType === 'qwen3_5' ? f.int('intermediate_size') : f.int('intermediate_size', 1),
    numHiddenLayers,
    layerTypes,
    numAttentionHeads,
    numKeyValueHeads,
    headDim,
    rotaryDim,
    ropeTheta,
    mropeSection,
    rmsNormEps: f.positive('rms_norm_eps', 1e-6),
    maxPositionEmbeddings: f.int('max_position_embeddings', 262144),
    tieWordEmbeddings: tie,
    linear,
    torchDtype: dtypeOf(f) ?? dtypeOf(top),
    bosTokenId: bos,
    eosTokenIds,
    moe,
    quantization,
    mtpLayers: f.int('mtp_num_hidden_layers', 0, 0),
    hasVision: top.has('vision_config'),
  };
}

/** The config.json of the release layout: the composite model's keys, the text model's under text_config. */
export function qwen35ToHfConfig(c: Qwen35Config): Record<string, unknown> {
  const moe = c.moe;
  const text: Record<string, unknown> = {
    model_type: moe ? 'qwen3_5_moe_text' : 'qwen3_5_text',
    vocab_size: c.vocabSize,
    hidden_size: c.hiddenSize,
    num_hidden_layers: c.numHiddenLayers,
    layer_types: c.layerTypes,
    full_attention_interval: 4,
    num_attention_heads: c.numAttentionHeads,
    num_key_value_heads: c.numKeyValueHeads,
    head_dim: c.headDim,
    hidden_act: 'silu',
    attn_output_gate: true,
    attention_bias: false,
    rms_norm_eps: c.rmsNormEps,
    max_position_embeddings: c.maxPositionEmbeddings,
    rope_parameters: {
      rope_type: 'default',
      rope_theta: c.ropeTheta,
      partial_rotary_factor: c.rotaryDim / c.headDim,
      mrope_section: c.mropeSection ?? [11, 11, 10],
      mrope_interleaved: true,
    },
    linear_num_key_heads: c.linear.numKeyHeads,
    linear_num_value_heads: c.linear.numValueHeads,
    linear_key_head_dim: c.linear.keyHeadDim,
    linear_value_head_dim: c.linear.valueHeadDim,
    linear_conv_kernel_dim: c.linear.convKernel,
    mtp_num_hidden_layers: c.mtpLayers,
    eos_token_id: c.eosTokenIds.length === 1 ? c.eosTokenIds[0] : c.eosTokenIds,
    bos_token_id: c.bosTokenId,
    dtype: c.torchDtype,
  };
  if (moe) {
    Object.assign(text, {
      num_experts: moe.numExperts,
      num_experts_per_tok: moe.numExpertsPerTok,
      moe_intermediate_size: moe.moeIntermediateSize,
      shared_expert_intermediate_size: moe.sharedExpertIntermediateSize,
    });
  } else text.intermediate_size = c.intermediateSize;
  const json: Record<string, unknown> = {
    architectures: [moe ? 'Qwen3_5MoeForConditionalGeneration' : 'Qwen3_5ForConditionalGeneration'],
    model_type: c.modelType,
    tie_word_embeddings: c.tieWordEmbeddings,
    text_config: text,
  };
  if (c.quantization) json.quantization_config = quantizationToHf(c.quantization);
  return json;
}

/** Whether layer i is a Gated DeltaNet. */
export const isLinearLayer = (c: Qwen35Config, i: number): boolean => c.layerTypes[i] === 'linear_attention';
