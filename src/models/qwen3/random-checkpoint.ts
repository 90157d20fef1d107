// Random-weight Qwen3 / Qwen3-MoE checkpoints in the exact Hugging Face layout (models/random-weights.ts), for
// tests, benchmarks and the CLI's built-in default model, so nothing has to be downloaded.
import type { DType } from '../../core/dtype.js';
import { toHfConfig, type Qwen3Config } from './config.js';
import type { Checkpoint } from '../../formats/checkpoint.js';
import { randomCheckpointInMemory, savedConfig, writeRandomCheckpoint, type RandomCheckpointOptions, type RandomWeightDType } from '../random-weights.js';
import { qwen3WeightSpecs } from './layout.js';

export type { RandomCheckpointOptions, RandomWeightDType };

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

/** The config as saved for this weight dtype (FP8 adds quantization_config, as Qwen3-*-FP8 checkpoints do). */
export function randomCheckpointConfig(config: Qwen3Config, dtype: RandomWeightDType): Qwen3Config {
  return savedConfig(config, dtype);
}

/** Writes a random-weight checkpoint of `config` to dir; returns the weight file names. */
export async function writeRandomQwen3Checkpoint(dir: string, config: Qwen3Config, options: RandomCheckpointOptions = {}): Promise<string[]> {
  const dtype = options.dtype ?? 'bfloat16';
  return writeRandomCheckpoint(dir, qwen3WeightSpecs(config), toHfConfig(randomCheckpointConfig(config, dtype)), { ...options, dtype });
}

/** The same random checkpoint (same values for the same seed) in memory, with config.json parsed: for pages. */
export async function randomQwen3Checkpoint(config: Qwen3Config, options: Pick<RandomCheckpointOptions, 'dtype' | 'seed'> = {}): Promise<Checkpoint> {
  const dtype = options.dtype ?? 'bfloat16';
  return randomCheckpointInMemory(qwen3WeightSpecs(config), toHfConfig(randomCheckpointConfig(config, dtype)), { ...options, dtype });
}
