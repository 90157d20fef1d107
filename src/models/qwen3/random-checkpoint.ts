// Random-weight Qwen3 / Qwen3-MoE checkpoints in the exact Hugging Face layout (models/random-weights.ts), for
// tests, benchmarks and the CLI's built-in default model, so nothing has to be downloaded. The presets are
// presets.ts's, re-exported here for the callers that write them.
import { toHfConfig, type Qwen3Config } from './config.js';
import type { Checkpoint } from '../../formats/checkpoint.js';
import { randomCheckpointInMemory, savedConfig, writeRandomCheckpoint, type RandomCheckpointOptions, type RandomWeightDType } from '../random-weights.js';
import { qwen3WeightSpecs } from './layout.js';

export type { RandomCheckpointOptions, RandomWeightDType };

export { QWEN3_PRESETS } from './presets.js';

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
