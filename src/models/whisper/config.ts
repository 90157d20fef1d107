// Hugging Face config.json of OpenAI's Whisper (tiny ... large-v3, large-v3-turbo, distil-whisper) -> a typed,
// validated config, and back for the checkpoint generator. Follows transformers' WhisperConfig (its defaults are
// whisper-tiny's); every field the forward reads is checked and an error names the file and the field. Fields that
// only steer training (dropouts, layerdrop, SpecAugment, the classifier head) are not read.
import { parseDType, type DType } from '../../core/dtype.js';
import { CheckpointError } from '../../core/errors.js';
import { Fields, type Json } from '../../formats/config-fields.js';

/** transformers' ACT2FN names a Whisper checkpoint may carry (all real ones use 'gelu'). */
export const WHISPER_ACTIVATIONS = ['gelu', 'gelu_new', 'gelu_pytorch_tanh', 'relu', 'silu', 'swish'] as const;
export type WhisperActivation = (typeof WHISPER_ACTIVATIONS)[number];

export interface WhisperConfig {
  readonly modelType: 'whisper';
  readonly vocabSize: number;
  /** 80 up to large-v2, 128 for large-v3 / turbo. */
  readonly numMelBins: number;
  readonly dModel: number;
  readonly encoderLayers: number;
  readonly encoderAttentionHeads: number;
  readonly encoderFfnDim: number;
  readonly decoderLayers: number;
  readonly decoderAttentionHeads: number;
  readonly decoderFfnDim: number;
  /** Encoder positions (1500): the input is 2 x this many mel frames (conv2 has stride 2). */
  readonly maxSourcePositions: number;
  /** Decoder positions (448): prompt + generated tokens. */
  readonly maxTargetPositions: number;
  readonly activationFunction: WhisperActivation;
  /** Parsed for completeness: transformers' Whisper computes embed_scale but never applies it. */
  readonly scaleEmbedding: boolean;
  /** proj_out shares embed_tokens (true for every release). */
  readonly tieWordEmbeddings: boolean;
  readonly padTokenId: number;
  readonly bosTokenId: number;
  readonly eosTokenId: number;
  readonly decoderStartTokenId: number;
  /** Suppressed at every step (transformers' suppress_tokens; openai/whisper computes its own from the tokenizer). */
  readonly suppressTokens: readonly number[];
  /** Suppressed at the first sampled position (' ' and <|endoftext|>). */
  readonly beginSuppressTokens: readonly number[];
  readonly torchDtype?: DType;
}

function intList(f: Fields, key: string, fallback: readonly number[]): number[] {
  const raw = f.raw()[key];
  if (raw === undefined || raw === null) return [...fallback];
  return f.ints(key, 0);
}

export function parseWhisperConfig(json: unknown, file = 'config.json'): WhisperConfig {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new CheckpointError('config is not a JSON object', { file });
  const f = new Fields(json as Json, file);
  const modelType = f.string('model_type');
  if (modelType !== 'whisper') throw new CheckpointError(`model_type '${modelType}' is not a Whisper config (expected 'whisper')`, { file });
  const dModel = f.int('d_model', 384);
  const encoderAttentionHeads = f.int('encoder_attention_heads', 6);
  const decoderAttentionHeads = f.int('decoder_attention_heads', 6);
  if (dModel % encoderAttentionHeads !== 0) f.fail('encoder_attention_heads', `a divisor of d_model (${dModel})`);
  if (dModel % decoderAttentionHeads !== 0) f.fail('decoder_attention_heads', `a divisor of d_model (${dModel})`);
  const activationFunction = f.string('activation_function', 'gelu');
  if (!(WHISPER_ACTIVATIONS as readonly string[]).includes(activationFunction)) f.fail('activation_function', `one of ${WHISPER_ACTIVATIONS.join(', ')}`);
  const vocabSize = f.int('vocab_size', 51865);
  const tokenId = (key: string, fallback: number) => {
    const id = f.int(key, fallback, 0);
    if (id >= vocabSize) f.fail(key, `a token id below vocab_size (${vocabSize})`);
    return id;
  };
  const torchDtype = f.has('torch_dtype') ? parseDType(f.string('torch_dtype')) : f.has('dtype') ? parseDType(f.string('dtype')) : undefined;
  return {
    modelType: 'whisper',
    vocabSize,
    numMelBins: f.int('num_mel_bins', 80),
    dModel,
    encoderLayers: f.int('encoder_layers', 4),
    encoderAttentionHeads,
    encoderFfnDim: f.int('encoder_ffn_dim', 1536),
    decoderLayers: f.int('decoder_layers', 4),
    decoderAttentionHeads,
    decoderFfnDim: f.int('decoder_ffn_dim', 1536),
    maxSourcePositions: f.int('max_source_positions', 1500),
    maxTargetPositions: f.int('max_target_positions', 448),
    activationFunction: activationFunction as WhisperActivation,
    scaleEmbedding: f.bool('scale_embedding', false),
    tieWordEmbeddings: f.bool('tie_word_embeddings', true),
    padTokenId: tokenId('pad_token_id', 50256),
    bosTokenId: tokenId('bos_token_id', 50256),
    eosTokenId: tokenId('eos_token_id', 50256),
    decoderStartTokenId: tokenId('decoder_start_token_id', 50257),
    suppressTokens: intList(f, 'suppress_tokens', []),
    beginSuppressTokens: intList(f, 'begin_suppress_tokens', [220, 50256]),
    torchDtype,
  };
}

/** The config.json transformers writes for this config. */
export function whisperToHfConfig(c: WhisperConfig): Record<string, unknown> {
  const json: Record<string, unknown> = {
    architectures: ['WhisperForConditionalGeneration'],
    model_type: 'whisper',
    vocab_size: c.vocabSize,
    num_mel_bins: c.numMelBins,
    d_model: c.dModel,
    encoder_layers: c.encoderLayers,
    encoder_attention_heads: c.encoderAttentionHeads,
    encoder_ffn_dim: c.encoderFfnDim,
    decoder_layers: c.decoderLayers,
    decoder_attention_heads: c.decoderAttentionHeads,
    decoder_ffn_dim: c.decoderFfnDim,
    num_hidden_layers: c.encoderLayers,
    max_source_positions: c.maxSourcePositions,
    max_target_positions: c.maxTargetPositions,
    activation_function: c.activationFunction,
    scale_embedding: c.scaleEmbedding,
    tie_word_embeddings: c.tieWordEmbeddings,
    pad_token_id: c.padTokenId,
    bos_token_id: c.bosTokenId,
    eos_token_id: c.eosTokenId,
    decoder_start_token_id: c.decoderStartTokenId,
    suppress_tokens: [...c.suppressTokens],
    begin_suppress_tokens: [...c.beginSuppressTokens],
    is_encoder_decoder: true,
    use_cache: true,
  };
  if (c.torchDtype) json.torch_dtype = c.torchDtype;
  return json;
}

/** Head width of the encoder / decoder attention. */
export const encoderHeadDim = (c: WhisperConfig) => c.dModel / c.encoderAttentionHeads;
export const decoderHeadDim = (c: WhisperConfig) => c.dModel / c.decoderAttentionHeads;
/** Mel frames the encoder takes: conv1 keeps the length, conv2 halves it. */
export const inputFrames = (c: WhisperConfig) => 2 * c.maxSourcePositions;
