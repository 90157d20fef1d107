// The Qwen3 family's built-in presets (`--model builtin:<name>`, `tensorgpu checkpoint random --preset`), dense and
// MoE. The family table (models/families.ts) collects them; random-checkpoint.ts writes their weights and
// builtin.ts the tokenizer they ship with.
import type { DType } from '../../core/dtype.js';
import type { Qwen3Config } from './config.js';

const QWEN3_TOKENS = { vocabSize: 151936, bosTokenId: 151643, eosTokenIds: [151645, 151643] };

const COMMON = {
  rmsNormEps: 1e-6,
  ropeTheta: 1_000_000,
  maxPositionEmbeddings: 4096,
  attentionBias: false,
  torchDtype: 'bfloat16' as DType,
  ...QWEN3_TOKENS,
};

/**
 * Small configs with the real Qwen3 vocabulary (so the real tokenizer works with them). Hidden 128 keeps the
 * 151936-row embedding and lm_head (most of the weights here) cheap; the MoE intermediate size stays 128 so the
 * experts can be quantized to 128x128 FP8 blocks (`--dtype fp8`).
 */
export const QWEN3_PRESETS: Readonly<Record<string, Qwen3Config>> = {
  'qwen3-moe-tiny': {
    ...COMMON,
    modelType: 'qwen3_moe',
    hiddenSize: 128,
    intermediateSize: 384,
    numHiddenLayers: 4,
    numAttentionHeads: 4,
    numKeyValueHeads: 2,
    headDim: 32,
    tieWordEmbeddings: false,
    moe: { numExperts: 32, numExpertsPerTok: 4, moeIntermediateSize: 128, normTopkProb: true, decoderSparseStep: 1, mlpOnlyLayers: [] },
  },
  'qwen3-tiny': {
    ...COMMON,
    modelType: 'qwen3',
    hiddenSize: 128,
    intermediateSize: 384,
    numHiddenLayers: 4,
    numAttentionHeads: 4,
    numKeyValueHeads: 2,
    headDim: 32,
    tieWordEmbeddings: true,
  },
};
