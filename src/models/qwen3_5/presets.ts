// Random-weight Qwen3.5 / Qwen3.6 checkpoints in the exact release layout (nested text_config, the
// `model.language_model.` prefix, fused 3-D experts; FP8 checkpoints store experts one by one with 128x128 block
// scales), and the built-in presets: small widths with Qwen3.6-35B-A3B's shape (3 Gated DeltaNet layers then one
// gated attention layer, twice; 2 value heads per key head; a quarter of each attention head rotated; 32 experts top
// 4 plus a shared expert of the experts' width) and the dense Qwen3.5 shape.
import { savedConfig, writeRandomCheckpoint, type RandomCheckpointOptions } from '../random-weights.js';
import { qwen35ToHfConfig, type Qwen35Config } from './config.js';
import { qwen35CheckpointSpecs } from './layout.js';

const PATTERN = ['linear_attention', 'linear_attention', 'linear_attention', 'full_attention'] as const;

const COMMON = {
  // The release's 248,320 rows: the presets ship the Qwen3.5 stand-in tokenizer (qwen3_5-tokenizer.ts, see builtin.ts).
  vocabSize: 248320,
  hiddenSize: 128,
  // Head dim 128 (the release's is 256): FP8 checkpoints' 128-row q_proj blocks then regroup per head.
  numAttentionHeads: 4,
  numKeyValueHeads: 2,
  headDim: 128,
  rotaryDim: 32,
  ropeTheta: 10_000_000,
  mropeSection: [11, 11, 10],
  rmsNormEps: 1e-6,
  maxPositionEmbeddings: 262144,
  tieWordEmbeddings: false,
  linear: { numKeyHeads: 2, numValueHeads: 4, keyHeadDim: 32, valueHeadDim: 32, convKernel: 4 },
  torchDtype: 'bfloat16' as const,
  eosTokenIds: [248046, 248044], // generation_config.json's <|im_end|>, <|endoftext|>
  mtpLayers: 0,
  hasVision: false,
};

export const QWEN3_5_PRESETS: Readonly<Record<string, Qwen35Config>> = {
  'qwen3.6-moe-tiny': {
    ...COMMON,
    modelType: 'qwen3_5_moe',
    intermediateSize: 1,
    numHiddenLayers: 8,
    layerTypes: [...PATTERN, ...PATTERN],
    moe: { numExperts: 32, numExpertsPerTok: 4, moeIntermediateSize: 128, sharedExpertIntermediateSize: 128 },
  },
  'qwen3.5-tiny': {
    ...COMMON,
    // The small dense Qwen3.5 models tie their lm_head to the embedding.
    tieWordEmbeddings: true,
    modelType: 'qwen3_5',
    intermediateSize: 384,
    numHiddenLayers: 4,
    layerTypes: [...PATTERN],
  },
};

/**
 * expertsOneByOne: the layout FP8 checkpoints use (the default for dtype 'fp8'), for any dtype. mtp: also write the
 * multi-token-prediction layer (`mtp.*`, config.mtpLayers of them, at least one; off by default).
 */
export async function writeRandomQwen35Checkpoint(
  dir: string,
  config: Qwen35Config,
  options: RandomCheckpointOptions & { expertsOneByOne?: boolean; mtp?: boolean } = {},
): Promise<string[]> {
  const dtype = options.dtype ?? 'bfloat16';
  const saved = options.mtp ? { ...config, mtpLayers: Math.max(1, config.mtpLayers) } : config;
  const specs = qwen35CheckpointSpecs(saved, options.expertsOneByOne ?? dtype === 'fp8', { mtp: options.mtp });
  return writeRandomCheckpoint(dir, specs, qwen35ToHfConfig(savedConfig(saved, dtype)), { ...options, dtype });
}
