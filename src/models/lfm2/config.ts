// Hugging Face config.json of Liquid AI's LFM2 (dense: LFM2-350M ... 2.6B) and LFM2-MoE (LFM2-8B-A1B,
// LFM2.5-8B-A1B, LFM2-24B-A2B) -> a typed, validated config, and back for the checkpoint generator. Follows
// transformers' Lfm2Config / Lfm2MoeConfig and Lfm2MLP, legacy keys included (block_ff_dim, theta, tie_embedding,
// full_attn_idxs, rope_parameters); every field is checked and an error names the file and the field.
import { parseDType, type DType } from '../../core/dtype.js';
import { CheckpointError } from '../../core/errors.js';
import { Fields, type Json } from '../../formats/config-fields.js';
import { parseQuantization, parseRopeScaling, quantizationToHf, type Fp8QuantizationConfig, type RopeScaling } from '../qwen3/config.js';

export type Lfm2LayerType = 'conv' | 'full_attention';

export interface Lfm2MoeConfig {
  readonly numExperts: number;
  readonly numExpertsPerTok: number;
  readonly moeIntermediateSize: number;
  /** Layers 0 .. numDenseLayers-1 keep a dense feed-forward; the rest are MoE. */
  readonly numDenseLayers: number;
  /** Divide the chosen sigmoid scores by (their sum + 1e-6). */
  readonly normTopkProb: boolean;
  /** The router picks by sigmoid + expert_bias (an F32 [E] tensor per MoE layer). */
  readonly useExpertBias: boolean;
  readonly routedScalingFactor: number;
}

export interface Lfm2Config {
  readonly modelType: 'lfm2' | 'lfm2_moe';
  readonly vocabSize: number;
  readonly hiddenSize: number;
  /** The dense feed-forward width the weights have (LFM2's block_auto_adjust_ff_dim already applied). */
  readonly intermediateSize: number;
  readonly numHiddenLayers: number;
  readonly numAttentionHeads: number;
  readonly numKeyValueHeads: number;
  readonly headDim: number;
  readonly layerTypes: readonly Lfm2LayerType[];
  readonly normEps: number;
  readonly ropeTheta: number;
  readonly ropeScaling?: RopeScaling;
  readonly maxPositionEmbeddings: number;
  readonly tieWordEmbeddings: boolean;
  /** Biases on the conv's in_proj, conv and out_proj. */
  readonly convBias: boolean;
  /** Taps of the short conv (conv_L_cache). */
  readonly convLCache: number;
  readonly torchDtype?: DType;
  readonly bosTokenId?: number;
  readonly padTokenId?: number;
  readonly eosTokenIds: readonly number[];
  /** Present for lfm2_moe. */
  readonly moe?: Lfm2MoeConfig;
  readonly quantization?: Fp8QuantizationConfig;
}

export const LFM2_MODEL_TYPES = ['lfm2', 'lfm2_moe'] as const;

/** Lfm2MLP's width rule: 2/3 of the configured size, times the multiplier, rounded up to block_multiple_of. */
export function adjustedFfDim(ff: number, multiplier: number | null, multipleOf: number): number {
  let out = Math.trunc((2 * ff) / 3);
  // transformers rounds only when a multiplier is set (its default 1.0 is; an explicit null skips both).
  if (multiplier !== null) {
    out = Math.trunc(multiplier * out);
    out = multipleOf * Math.ceil(out / multipleOf);
  }
  return out;
}

function optionalPositive(f: Fields, key: string, fallback: number | null): number | null {
  if (f.raw()[key] === null) return null;
  return f.has(key) ? f.positive(key) : fallback;
}

export function parseLfm2Config(json: unknown, file = 'config.json'): Lfm2Config {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new CheckpointError('config is not a JSON object', { file });
  const f = new Fields(json as Json, file);
  const modelType = f.string('model_type');
  if (modelType !== 'lfm2' && modelType !== 'lfm2_moe')
    throw new CheckpointError(`model_type '${modelType}' is not an LFM2 config (expected ${LFM2_MODEL_TYPES.join(' or ')})`, { file });
  const hiddenSize = f.int('hidden_size');
  const numHiddenLayers = f.int('num_hidden_layers');
  const numAttentionHeads = f.int('num_attention_heads');
  const numKeyValueHeads = f.int('num_key_value_heads', numAttentionHeads);
  if (numAttentionHeads % numKeyValueHeads !== 0) {
    throw new CheckpointError(`num_attention_heads (${numAttentionHeads}) must be a multiple of num_key_value_heads (${numKeyValueHeads})`, { file });
  }
  if (!f.has('head_dim') && hiddenSize % numAttentionHeads !== 0)
    f.fail('head_dim', `given when hidden_size (${hiddenSize}) is not a multiple of num_attention_heads`);
  const headDim = f.int('head_dim', hiddenSize / numAttentionHeads);
  if (headDim % 2 !== 0) f.fail('head_dim', 'even (RoPE rotates pairs)');
  const vocabSize = f.int('vocab_size', 65536);

  let layerTypes: Lfm2LayerType[];
  if (f.has('layer_types')) {
    layerTypes = f.strings('layer_types', ['conv', 'full_attention'] as const);
    if (layerTypes.length !== numHiddenLayers) f.fail('layer_types', `a list of num_hidden_layers (${numHiddenLayers}) entries (it has ${layerTypes.length})`);
  } else {
    // transformers: without layer_types, full_attn_idxs (default: every layer) names the attention layers.
    const idxs = f.has('full_attn_idxs') ? f.ints('full_attn_idxs') : Array.from({ length: numHiddenLayers }, (_, i) => i);
    const outside = idxs.find((i) => i >= numHiddenLayers);
    if (outside !== undefined) f.fail('full_attn_idxs', `layer indices below num_hidden_layers (${numHiddenLayers})`);
    layerTypes = Array.from({ length: numHiddenLayers }, (_, i) => (idxs.includes(i) ? 'full_attention' : 'conv'));
  }

  const ffKey = f.has('block_ff_dim') ? 'block_ff_dim' : 'intermediate_size';
  const rawFf = f.int(ffKey);
  const intermediateSize =
    modelType === 'lfm2' && f.bool('block_auto_adjust_ff_dim', true)
      ? adjustedFfDim(rawFf, optionalPositive(f, 'block_ffn_dim_multiplier', 1), f.int('block_multiple_of', 256))
      : rawFf;

  const ropeParameters = f.object('rope_parameters');
  const ropeTheta = ropeParameters?.has('rope_theta')
    ? ropeParameters.positive('rope_theta')
    : f.has('theta')
      ? f.positive('theta')
      : f.positive('rope_theta', 1_000_000);
  const scaling = parseRopeScaling(f.object('rope_scaling')) ?? (ropeParameters && parseRopeScaling(ropeParameters));
  const ropeScaling = scaling && scaling.type !== 'default' ? scaling : undefined;

  let moe: Lfm2MoeConfig | undefined;
  if (modelType === 'lfm2_moe') {
    const numExperts = f.int('num_experts');
    const numExpertsPerTok = f.int('num_experts_per_tok');
    if (numExpertsPerTok > numExperts) f.fail('num_experts_per_tok', `at most num_experts (${numExperts})`);
    moe = {
      numExperts,
      numExpertsPerTok,
      moeIntermediateSize: f.int('moe_intermediate_size'),
      numDenseLayers: f.int('num_dense_layers', 2, 0),
      normTopkProb: f.bool('norm_topk_prob', true),
      useExpertBias: f.bool('use_expert_bias', true),
      routedScalingFactor: f.positive('routed_scaling_factor', 1),
    };
  }
  let torchDtype: DType | undefined;
  if (f.has('torch_dtype') || f.has('dtype')) {
    try {
      torchDtype = parseDType(f.string(f.has('torch_dtype') ? 'torch_dtype' : 'dtype'));
    } catch {
      torchDtype = undefined; // informative only: the safetensors headers say what each tensor really is
    }
  }
  const bos = f.has('bos_token_id') ? f.int('bos_token_id', undefined, 0) : undefined;
  const pad = f.has('pad_token_id') ? f.int('pad_token_id', undefined, 0) : undefined;
  const eosTokenIds = f.has('eos_token_id') ? f.ints('eos_token_id') : [2];
  for (const [key, id] of [['bos_token_id', bos] as const, ['pad_token_id', pad] as const, ...eosTokenIds.map((id) => ['eos_token_id', id] as const)]) {
    if (id !== undefined && id >= vocabSize) throw new CheckpointError(`${key} ${id} is outside vocab_size ${vocabSize}`, { file });
  }
  const convLCache = f.int('conv_L_cache', 3);
  if (convLCache > 9) f.fail('conv_L_cache', 'at most 9 (the short-conv kernel holds 8 past rows)');
  return {
    modelType,
    vocabSize,
    hiddenSize,
    intermediateSize,
    numHiddenLayers,
    numAttentionHeads,
    numKeyValueHeads,
    headDim,
    layerTypes,
    normEps: f.positive('norm_eps', 1e-5),
    ropeTheta,
    ropeScaling,
    maxPositionEmbeddings: f.int('max_position_embeddings', 128000),
    tieWordEmbeddings: f.has('tie_embedding') ? f.bool('tie_embedding', true) : f.bool('tie_word_embeddings', true),
    convBias: f.bool('conv_bias', false),
    convLCache,
    torchDtype,
    bosTokenId: bos,
    padTokenId: pad,
    eosTokenIds,
    moe,
    quantization: parseQuantization(f.object('quantization_config'), file),
  };
}

/** Whether layer i's feed-forward is MoE (transformers: index >= num_dense_layers). */
export function isLfm2MoeLayer(c: Lfm2Config, i: number): boolean {
  return c.moe !== undefined && i >= c.moe.numDenseLayers;
}

/** The config.json a Hugging Face checkpoint of this config carries (current key names, ff width as is). */
export function lfm2ToHfConfig(c: Lfm2Config): Record<string, unknown> {
  const json: Record<string, unknown> = {
    architectures: [c.modelType === 'lfm2_moe' ? 'Lfm2MoeForCausalLM' : 'Lfm2ForCausalLM'],
    model_type: c.modelType,
    vocab_size: c.vocabSize,
    hidden_size: c.hiddenSize,
    intermediate_size: c.intermediateSize,
    num_hidden_layers: c.numHiddenLayers,
    num_attention_heads: c.numAttentionHeads,
    num_key_value_heads: c.numKeyValueHeads,
    layer_types: c.layerTypes,
    norm_eps: c.normEps,
    rope_theta: c.ropeTheta,
    max_position_embeddings: c.maxPositionEmbeddings,
    tie_word_embeddings: c.tieWordEmbeddings,
    conv_bias: c.convBias,
    conv_L_cache: c.convLCache,
    torch_dtype: c.torchDtype,
    bos_token_id: c.bosTokenId,
    pad_token_id: c.padTokenId,
    eos_token_id: c.eosTokenIds.length === 1 ? c.eosTokenIds[0] : c.eosTokenIds,
  };
  if (c.headDim !== c.hiddenSize / c.numAttentionHeads) json.head_dim = c.headDim;
  if (c.modelType === 'lfm2') json.block_auto_adjust_ff_dim = false;
  if (c.moe) {
    Object.assign(json, {
      num_experts: c.moe.numExperts,
      num_experts_per_tok: c.moe.numExpertsPerTok,
      moe_intermediate_size: c.moe.moeIntermediateSize,
      num_dense_layers: c.moe.numDenseLayers,
      norm_topk_prob: c.moe.normTopkProb,
      use_expert_bias: c.moe.useExpertBias,
      routed_scaling_factor: c.moe.routedScalingFactor,
    });
  }
  if (c.quantization) json.quantization_config = quantizationToHf(c.quantization);
  return json;
}
