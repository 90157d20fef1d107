// A Whisper model from an open Checkpoint: a folder on disk (load.ts), or in a page a URL, picked files or a
// checkpoint made in memory. Nothing here touches the file system, so the browser entry exports it.
import type { DType } from '../../core/dtype.js';
import type { Checkpoint } from '../../formats/checkpoint.js';
import type { DeviceName } from '../../runtime/backend.js';
import { parseWhisperConfig } from './config.js';
import { WhisperModel } from './model.js';
import { loadWhisperWeights } from './weights.js';

export interface WhisperFromCheckpointOptions {
  device?: DeviceName;
  /** Convert the weights to this dtype at load (default: as stored). */
  dtype?: DType;
  /** Decoder positions the cache holds (default max_target_positions). */
  maxSequence?: number;
}

/** The model of an open checkpoint (its config.json must be a Whisper one). */
export async function whisperFromCheckpoint(ck: Checkpoint, options: WhisperFromCheckpointOptions = {}): Promise<WhisperModel> {
  const config = parseWhisperConfig(ck.config, `${ck.dir}/config.json`);
  const weights = await loadWhisperWeights(ck, config, { device: options.device, dtype: options.dtype });
  return new WhisperModel(config, weights, { maxSequence: options.maxSequence });
}
