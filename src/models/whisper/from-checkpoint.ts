// A Whisper model from an open Checkpoint: a folder on disk (load.ts), or in a page a URL, picked files or a
// checkpoint made in memory. Nothing here touches the file system, so the browser entry exports it.
import type { DType } from '../../core/dtype.js';
import type { Checkpoint } from '../../formats/checkpoint.js';
import type { DeviceName } from '../../runtime/backend.js';
import type { WeightLoadingOptions } from '../layers/weights.js';
import { parseWhisperConfig } from './config.js';
import { WhisperModel } from './model.js';
import { loadWhisperWeights } from './weights.js';

/**
 * A float dtype converts the weights at load; 'fp8' / 'int4' quantize the encoder's and decoder's attention and MLP
 * projections instead (FP8 128x128 block scales, or packed 4 bits in groups of groupSize along K), leaving the convs,
 * embeddings, positions, norms and proj_out as stored.
 */
export type WhisperWeightDType = DType | 'fp8' | 'int4';

/** The weight loader's options for a Whisper weight dtype. */
export function whisperWeightLoading(
  dtype: WhisperWeightDType | undefined,
  groupSize?: number,
): Pick<WeightLoadingOptions, 'dtype' | 'quantize' | 'groupSize'> {
  if (dtype === 'fp8') return { quantize: 'float8_e4m3fn' };
  if (dtype === 'int4') return { quantize: 'int4', groupSize };
  return { dtype };
}

export interface WhisperFromCheckpointOptions {
  device?: DeviceName;
  /** A float dtype to convert the weights to, or 'fp8' / 'int4' to quantize the projections (default: as stored). */
  dtype?: WhisperWeightDType;
  /** int4 group size along K: 32, 64 or 128 (default 128; a K it does not divide takes the largest that does). */
  groupSize?: number;
  /** Decoder positions the cache holds (default max_target_positions). */
  maxSequence?: number;
}

/** The model of an open checkpoint (its config.json must be a Whisper one). */
export async function whisperFromCheckpoint(ck: Checkpoint, options: WhisperFromCheckpointOptions = {}): Promise<WhisperModel> {
  const config = parseWhisperConfig(ck.config, `${ck.dir}/config.json`);
  const weights = await loadWhisperWeights(ck, config, { device: options.device, ...whisperWeightLoading(options.dtype, options.groupSize) });
  return new WhisperModel(config, weights, { maxSequence: options.maxSequence });
}
