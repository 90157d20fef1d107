// Random-weight LFM2 / LFM2-MoE checkpoints in the exact Hugging Face layout (models/random-weights.ts). The presets
// are presets.ts's, re-exported here for the callers that write them.
import { lfm2ToHfConfig, type Lfm2Config } from './config.js';
import { savedConfig, writeRandomCheckpoint, type RandomCheckpointOptions } from '../random-weights.js';
import { lfm2WeightSpecs } from './layout.js';

export { LFM2_PRESETS } from './presets.js';

export async function writeRandomLfm2Checkpoint(dir: string, config: Lfm2Config, options: RandomCheckpointOptions = {}): Promise<string[]> {
  const dtype = options.dtype ?? 'bfloat16';
  return writeRandomCheckpoint(dir, lfm2WeightSpecs(config), lfm2ToHfConfig(savedConfig(config, dtype)), { ...options, dtype });
}
