// A Qwen3 / Qwen3-MoE model from an opened Checkpoint wherever its bytes live (memory, a URL, a user's files):
// loadModel's weight step without the directory, tokenizer and Hub parts, so it runs in a browser page.
import type { DeviceName } from '../../backends/backend.js';
import { getDefaultDevice } from '../../backends/registry.js';
import type { DType } from '../../core/dtype.js';
import { CheckpointError } from '../../core/errors.js';
import type { Checkpoint } from '../../io/checkpoint.js';
import { parseQwen3Config } from '../../io/hf-config.js';
import type { MoeMode } from '../causal-lm.js';
import { Qwen3Model } from './model.js';
import { loadQwen3Weights } from './weights.js';

export interface Qwen3FromCheckpointOptions {
  device?: DeviceName;
  /** 'fp8' quantizes float linear weights to FP8 (128x128 blocks) at load; a float dtype converts them. */
  dtype?: DType | 'fp8';
  /** Positions the KV cache holds (default: the config's, at most 4096). */
  maxSequence?: number;
  kvDtype?: DType;
  moeMode?: MoeMode;
  /** Bytes loaded so far and in all, after each chunk. */
  onProgress?: (loaded: number, total: number) => void;
}

export async function qwen3FromCheckpoint(ck: Checkpoint, options: Qwen3FromCheckpointOptions = {}): Promise<Qwen3Model> {
  const file = `${ck.dir}/config.json`;
  if (ck.config === undefined) throw new CheckpointError('the checkpoint has no config.json', { file: ck.dir });
  const config = parseQwen3Config(ck.config, file);
  const total = ck.totalBytes;
  let done = 0;
  const weights = await loadQwen3Weights(ck, config, {
    device: options.device ?? getDefaultDevice(),
    quantize: options.dtype === 'fp8' ? 'float8_e4m3fn' : undefined,
    dtype: options.dtype === 'fp8' ? undefined : options.dtype,
    onBytes: (n) => options.onProgress?.((done += n), total),
  });
  const maxSequence = options.maxSequence ?? Math.min(config.maxPositionEmbeddings, 4096);
  return new Qwen3Model(config, weights, { maxSequence, kvDtype: options.kvDtype, moeMode: options.moeMode });
}
