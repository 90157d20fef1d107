// Hugging Face config.json -> a typed, validated model config (Qwen3 dense and Qwen3-MoE), and back (for the
// checkpoint generator). Every field is checked, and an error names the file and the field.
import { parseDType, type DType } from '../../core/dtype.js';
import { isInt4Method, parseInt4Quantization } from '../../formats/int4.js';
import { CheckpointError } from '../../core/errors.js';
import { Fields, type Json } from '../../formats/config-fields.js';

export interface RopeScaling {
  /** 'default' | 'linear' | 'dynamic' | 'yarn' | 'llama3' ...: HF's rope_type (or the older `type`). */
  readonly type: string;
  readonly factor: number;
  /** Every other numeric field (original_max_position_embeddings, beta_fast, ...), as given. */
  readonly params: Readonly<Record<string, number>>;
}

export interface MoeConfig {
  readonly numExperts: number;
  readonly numExpertsPerTok: number;
  readonly moeIntermediateSize: number;
  /** Renormalize the top-k router probabilities to sum to 1. */
  readonly normTopkProb: boolean;
  /** Every decoderSparseStep-th layer is sparse... */
  readonly decoderSparseStep: number;
  /** ...except these, which keep a dense MLP. */
  readonly mlpOnlyLayers: readonly number[];
}

/** FP8 checkpoints (HF `quantization_config` with quant_method 'fp8'). */
export interface Fp8QuantizationConfig {
  readonly method: 'fp8';
  readonly format: 'float8_e4m3fn' | 'float8_e5m2';
  /** [128, 128] for `weight_scale_inv` block scales; undefined for per-tensor/per-channel `weight_scale`. */
  readonly weightBlockSize?: readonly [number, number];
  readonly activationScheme: string;
  /** Modules left in high precision (HF `modules_to_not_convert`). */
  readonly modulesToNotConvert: readonly string[];
}

export interface Qwen3Config {
  readonly modelType: 'qwen3' | 'qwen3_moe';
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly intermediateSize: number;
  readonly numHiddenLayers: number;
  readonly numAttentionHeads: number;
  readonly numKeyValueHeads: number;
  readonly headDim: number;
  readonly rmsNormEps: number;
  readonly ropeTheta: number;
  readonly ropeScaling?: RopeScaling;
  readonly maxPositionEmbeddings: number;
  readonly tieWordEmbeddings: boolean;
  readonly attentionBias: boolean;
  /** The dtype the weights were saved in (`torch_dtype`), when given and known. */
  readonly torchDtype?: DType;
  readonly bosTokenId?: number;
  readonly eosTokenIds: readonly number[];
  /** Present for qwen3_moe. */
  readonly moe?: MoeConfig;
  readonly quantization?: Fp8QuantizationConfig;
}

export const QWEN3_MODEL_TYPES = ['qwen3', 'qwen3_moe'] as const;

export function parseRopeScaling(f: Fields | undefined): RopeScaling | undefined {
  if (!f) return undefined;
  const type = f.has('rope_type') ? f.string('rope_type') : f.string('type', 'default');
  const params: Record<string, number> = {};
  for (const [k, v] of Object.entries(f.raw())) if (typeof v === 'number' && k !== 'factor') params[k] = v;
  return { type, factor: f.positive('factor', 1), params };
}

export function parseQuantization(f: Fields | undefined, file: string): Fp8QuantizationConfig | undefined {
  if (!f) return undefined;
  const method = f.string('quant_method');
  // 4-bit checkpoints: validated here, read by the weight loader (formats/int4.ts); the FP8 config stays unset.
  if (isInt4Method(method)) {
    parseInt4Quantization(f, file);
    return undefined;
  }
  if (method !== 'fp8')
    throw new CheckpointError(`quantization_config.quant_method '${method}' is not supported (supported: fp8, gptq, awq, compressed-tensors)`, { file });
  const fmt = f.string('fmt', 'e4m3');
  if (fmt !== 'e4m3' && fmt !== 'e5m2') f.fail('fmt', "'e4m3' or 'e5m2'");
  const block = f.ints('weight_block_size', 1);
  if (block.length !== 0 && block.length !== 2) f.fail('weight_block_size', 'two integers [n, k]');
  const skip = f.raw().modules_to_not_convert;
  if (skip !== undefined && skip !== null && !(Array.isArray(skip) && skip.every((s) => typeof s === 'string')))
    f.fail('modules_to_not_convert', 'a list of strings');
  return {
    method: 'fp8',
    format: fmt === 'e4m3' ? 'float8_e4m3fn' : 'float8_e5m2',
    weightBlockSize: block.length === 2 ? [block[0], block[1]] : undefined,
    activationScheme: f.string('activation_scheme', 'dynamic'),
    modulesToNotConvert: (skip as string[] | undefined) ?? [],
  };
}

/** Validates a parsed config.json (`file` names it in errors). */
export function parseQwen3Config(json: unknown, file = 'config.json'): Qwen3Config {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new CheckpointError('config is not a JSON object', { file });
  const f = new Fields(json as Json, file);
  const modelType = f.string('model_type');
  if (!(QWEN3_MODEL_TYPES as readonly string[]).includes(modelType)) {
    throw new CheckpointError(`model_type '${modelType}' is not supported (supported: ${QWEN3_MODEL_TYPES.join(', ')})`, { file });
  }
  const act = f.string('hidden_act', 'silu');
  if (act !== 'silu') f.fail('hidden_act', "'silu' (Qwen3's SwiGLU)");
  const hiddenSize = f.int('hidden_size');
  const numAttentionHeads = f.int('num_attention_heads');
  const numKeyValueHeads = f.int('num_key_value_heads', numAttentionHeads);
  if (numAttentionHeads % numKeyValueHeads !== 0) {
    throw new CheckpointError(`num_attention_heads (${numAttentionHeads}) must be a multiple of num_key_value_heads (${numKeyValueHeads})`, { file });
  }
  if (!f.has('head_dim') && hiddenSize % numAttentionHeads !== 0)
    f.fail('head_dim', `given when hidden_size (${hiddenSize}) is not a multiple of num_attention_heads`);
  const headDim = f.int('head_dim', hiddenSize / numAttentionHeads);
  if (headDim % 2 !== 0) f.fail('head_dim', 'even (RoPE rotates pairs)');
  const numHiddenLayers = f.int('num_hidden_layers');
  const vocabSize = f.int('vocab_size');
  let torchDtype: DType | undefined;
  if (f.has('torch_dtype')) {
    try {
      torchDtype = parseDType(f.string('torch_dtype'));
    } catch {
      torchDtype = undefined; // informative only: the safetensors headers say what each tensor really is
    }
  }
  let moe: MoeConfig | undefined;
  if (modelType === 'qwen3_moe') {
    const numExperts = f.int('num_experts');
    const numExpertsPerTok = f.int('num_experts_per_tok');
    if (numExpertsPerTok > numExperts) f.fail('num_experts_per_tok', `at most num_experts (${numExperts})`);
    const mlpOnlyLayers = f.ints('mlp_only_layers');
    const outside = mlpOnlyLayers.find((l) => l >= numHiddenLayers);
    if (outside !== undefined) f.fail('mlp_only_layers', `layer indices below num_hidden_layers (${numHiddenLayers})`);
    moe = {
      numExperts,
      numExpertsPerTok,
      moeIntermediateSize: f.int('moe_intermediate_size'),
      normTopkProb: f.bool('norm_topk_prob', false),
      decoderSparseStep: f.int('decoder_sparse_step', 1),
      mlpOnlyLayers,
    };
  }
  const bos = f.has('bos_token_id') ? f.int('bos_token_id', undefined, 0) : undefined;
  const eosTokenIds = f.ints('eos_token_id');
  for (const [key, id] of [['bos_token_id', bos] as const, ...eosTokenIds.map((id) => ['eos_token_id', id] as const)]) {
    if (id !== undefined && id >= vocabSize) throw new CheckpointError(`${key} ${id} is outside vocab_size ${vocabSize}`, { file });
  }
  return {
    modelType: modelType as Qwen3Config['modelType'],
    vocabSize,
    hiddenSize,
    intermediateSize: f.int('intermediate_size'),
    numHiddenLayers,
    numAttentionHeads,
    numKeyValueHeads,
    headDim,
    rmsNormEps: f.positive('rms_norm_eps', 1e-6),
    ropeTheta: f.positive('rope_theta', 10000),
    ropeScaling: parseRopeScaling(f.object('rope_scaling')),
    maxPositionEmbeddings: f.int('max_position_embeddings', 32768),
    tieWordEmbeddings: f.bool('tie_word_embeddings', false),
    attentionBias: f.bool('attention_bias', false),
    torchDtype,
    bosTokenId: bos,
    eosTokenIds,
    moe,
    quantization: parseQuantization(f.object('quantization_config'), file),
  };
}

/** Whether layer `i` has a sparse MoE block (HF Qwen3MoeDecoderLayer's rule) rather than a dense MLP. */
export function isMoeLayer(config: Qwen3Config, i: number): boolean {
  const moe = config.moe;
  return !!moe && moe.numExperts > 0 && !moe.mlpOnlyLayers.includes(i) && (i + 1) % moe.decoderSparseStep === 0;
}

/** The config.json a Hugging Face checkpoint of this config carries. */
export function toHfConfig(c: Qwen3Config): Record<string, unknown> {
  const json: Record<string, unknown> = {
    architectures: [c.modelType === 'qwen3_moe' ? 'Qwen3MoeForCausalLM' : 'Qwen3ForCausalLM'],
    model_type: c.modelType,
    vocab_size: c.vocabSize,
    hidden_size: c.hiddenSize,
    intermediate_size: c.intermediateSize,
    num_hidden_layers: c.numHiddenLayers,
    num_attention_heads: c.numAttentionHeads,
    num_key_value_heads: c.numKeyValueHeads,
    head_dim: c.headDim,
    hidden_act: 'silu',
    rms_norm_eps: c.rmsNormEps,
    rope_theta: c.ropeTheta,
    rope_scaling: c.ropeScaling ? { rope_type: c.ropeScaling.type, factor: c.ropeScaling.factor, ...c.ropeScaling.params } : null,
    max_position_embeddings: c.maxPositionEmbeddings,
    tie_word_embeddings: c.tieWordEmbeddings,
    attention_bias: c.attentionBias,
    torch_dtype: c.torchDtype,
    bos_token_id: c.bosTokenId,
    eos_token_id: c.eosTokenIds.length === 1 ? c.eosTokenIds[0] : c.eosTokenIds,
  };
  if (c.moe) {
    Object.assign(json, {
      num_experts: c.moe.numExperts,
      num_experts_per_tok: c.moe.numExpertsPerTok,
      moe_intermediate_size: c.moe.moeIntermediateSize,
      norm_topk_prob: c.moe.normTopkProb,
      decoder_sparse_step: c.moe.decoderSparseStep,
      mlp_only_layers: c.moe.mlpOnlyLayers,
    });
  }
  if (c.quantization) json.quantization_config = quantizationToHf(c.quantization);
  return json;
}

/** quantization_config as HF writes it. */
export function quantizationToHf(q: Fp8QuantizationConfig): Record<string, unknown> {
  return {
    quant_method: 'fp8',
    fmt: q.format === 'float8_e4m3fn' ? 'e4m3' : 'e5m2',
    activation_scheme: q.activationScheme,
    weight_block_size: q.weightBlockSize,
    modules_to_not_convert: q.modulesToNotConvert.length > 0 ? q.modulesToNotConvert : undefined,
  };
}
