// A model of any supported family (families.ts, by config.json's model_type) from an open Checkpoint, wherever its
// bytes come from: a folder on disk (loadModel), a URL or files picked in a browser page. Weights stream onto the
// device chunk by chunk; nothing here touches a file system.
import { getDefaultDevice } from '../runtime/registry.js';
import type { DeviceName } from '../runtime/backend.js';
import type { DType } from '../core/dtype.js';
import { CheckpointError } from '../core/errors.js';
import type { Checkpoint } from '../formats/checkpoint.js';
import type { CausalLM, MoeMode } from './causal-lm.js';
import { familyOf, type ModelFamily } from './families.js';

export interface ModelFromCheckpointOptions {
  device?: DeviceName;
  /** 'fp8' quantizes float linear weights to FP8 (128x128 blocks) at load; a float dtype converts them. */
  dtype?: 'fp8' | DType;
  /** Cache capacity in positions (default: min(max_position_embeddings, 4096)). */
  maxSequence?: number;
  kvDtype?: DType;
  moeMode?: MoeMode;
  /** Progress: bytes read so far of `total`. */
  onProgress?: (done: number, total: number) => void;
  /** Called with the family before any weight is read (it throws to refuse one). */
  accept?: (family: ModelFamily, file: string) => void;
}

/** The model the checkpoint holds (qwen3, qwen3_moe, lfm2, lfm2_moe), its weights on `options.device`. */
export async function modelFromCheckpoint(ck: Checkpoint, options: ModelFromCheckpointOptions = {}): Promise<CausalLM> {
  if (ck.config === undefined) throw new CheckpointError('the checkpoint has no config.json', { file: ck.dir });
  const file = `${ck.dir}/config.json`;
  const family = familyOf(ck.config, file);
  options.accept?.(family, file);
  const config = family.parseConfig(ck.config, file);
  const total = ck.totalBytes;
  let done = 0;
  const weights = {
    device: options.device ?? getDefaultDevice(),
    quantize: options.dtype === 'fp8' ? ('float8_e4m3fn' as const) : undefined,
    dtype: options.dtype === 'fp8' ? undefined : options.dtype,
    onBytes: (n: number) => options.onProgress?.((done += n), total),
  };
  const maxSequence = options.maxSequence ?? Math.min(family.maxPositions(config), 4096);
  return family.load(ck, config, weights, { maxSequence, kvDtype: options.kvDtype, moeMode: options.moeMode });
}
