// Opens a Qwen3 / Qwen3-MoE checkpoint directory: typed config, weights streamed onto the device, tokenizer.
import { getDefaultDevice } from '../../backends/registry.js';
import type { DeviceName } from '../../backends/backend.js';
import type { DType } from '../../core/dtype.js';
import { Checkpoint } from '../../io/checkpoint.js';
import { parseQwen3Config, type Qwen3Config } from '../../io/hf-config.js';
import { TextTokenizer } from '../../generate/tokenizer.js';
import { Qwen3Model, type MoeMode } from './model.js';
import { loadQwen3Weights } from './weights.js';

export interface LoadModelOptions {
  device?: DeviceName;
  /** 'fp8' quantizes float linear weights to FP8 (128x128 blocks) at load; a float dtype converts them. */
  dtype?: 'fp8' | DType;
  /** KV cache capacity (default: min(max_position_embeddings, 4096)). */
  maxSequence?: number;
  kvDtype?: DType;
  moeMode?: MoeMode;
  /** Progress: bytes read so far of `total`. */
  onProgress?: (done: number, total: number) => void;
}

export interface LoadedModel {
  readonly model: Qwen3Model;
  readonly config: Qwen3Config;
  /** undefined when the directory has no tokenizer.json. */
  readonly tokenizer?: TextTokenizer;
  /** Bytes of tensor data read from disk. */
  readonly checkpointBytes: number;
}

export async function loadQwen3(dir: string, options: LoadModelOptions = {}): Promise<LoadedModel> {
  await using ck = await Checkpoint.open(dir);
  if (ck.config === undefined) throw new Error(`${dir} has no config.json`);
  const config = parseQwen3Config(ck.config, `${dir}/config.json`);
  const total = ck.totalBytes;
  let done = 0;
  const weights = await loadQwen3Weights(ck, config, {
    device: options.device ?? getDefaultDevice(),
    quantize: options.dtype === 'fp8' ? 'float8_e4m3fn' : undefined,
    dtype: options.dtype === 'fp8' ? undefined : options.dtype,
    onBytes: (n) => options.onProgress?.((done += n), total),
  });
  const maxSequence = options.maxSequence ?? Math.min(config.maxPositionEmbeddings, 4096);
  const model = new Qwen3Model(config, weights, { maxSequence, kvDtype: options.kvDtype, moeMode: options.moeMode });
  let tokenizer: TextTokenizer | undefined;
  try {
    tokenizer = TextTokenizer.fromDirectory(dir);
  } catch {
    tokenizer = undefined;
  }
  return { model, config, tokenizer, checkpointBytes: total };
}
