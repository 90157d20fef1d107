// Random-weight Whisper checkpoints in transformers' exact layout (models/random-weights.ts), with a
// generation_config.json that says whether the model is multilingual (as the releases' do).
import { savedConfig, writeRandomCheckpoint, type RandomCheckpointOptions } from '../random-weights.js';
import { whisperToHfConfig, type WhisperConfig } from './config.js';
import { whisperWeightSpecs } from './layout.js';

export { WHISPER_PRESETS } from './presets.js';

export async function writeRandomWhisperCheckpoint(dir: string, config: WhisperConfig, options: RandomCheckpointOptions = {}): Promise<string[]> {
  const dtype = options.dtype ?? 'float32';
  if (dtype === 'fp8') throw new RangeError('random Whisper checkpoints are float32, float16 or bfloat16 (the Whisper loader reads no FP8 weights yet)');
  const generation = {
    decoder_start_token_id: config.decoderStartTokenId,
    eos_token_id: config.eosTokenId,
    pad_token_id: config.padTokenId,
    bos_token_id: config.bosTokenId,
    begin_suppress_tokens: config.beginSuppressTokens,
    is_multilingual: true,
    max_initial_timestamp_index: 50,
  };
  return writeRandomCheckpoint(dir, whisperWeightSpecs(config), whisperToHfConfig(savedConfig(config, dtype)), {
    ...options,
    dtype,
    extraFiles: { 'generation_config.json': JSON.stringify(generation, null, 2), ...options.extraFiles },
  });
}
