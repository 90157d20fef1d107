// loadModel of an open Checkpoint: the one path every way of loading a model ends in. A model of any supported
// family (families.ts, by config.json's model_type), wherever the checkpoint's bytes come from: a folder on disk,
// a Hub repo or a built-in preset (load.ts, Node, opens those and comes here), a URL or files picked in a browser
// page. Weights stream onto the device chunk by chunk; nothing here touches a file system, so the browser entry
// exports this loadModel and the Node entry its superset (load.ts).
import { getDefaultDevice } from '../runtime/registry.js';
import type { DeviceName } from '../runtime/backend.js';
import type { DType } from '../core/dtype.js';
import { CheckpointError, DTypeError } from '../core/errors.js';
import { KV_DTYPES } from '../ops/attention-inputs.js';
import type { Checkpoint } from '../formats/checkpoint.js';
import type { TextTokenizer } from '../tokenizer/text-tokenizer.js';
import type { GenerationConfig } from '../formats/generation-config.js';
import type { CausalLM, MoeMode } from './causal-lm.js';
import { familyOf, type ModelFamily } from './families.js';

/** loadModel's options that hold wherever the checkpoint comes from. */
export interface ModelFromCheckpointOptions {
  device?: DeviceName;
  /**
   * 'fp8' quantizes float linear weights to FP8 (128x128 blocks) at load, 'int4' to packed 4 bits (affine, groups of
   * groupSize along K); a float dtype converts them.
   */
  dtype?: 'fp8' | 'int4' | DType;
  /** int4 group size: 32, 64 or 128 (default). */
  groupSize?: number;
  /** Cache capacity in positions (default: min(max_position_embeddings, 4096)). */
  maxSequence?: number;
  /**
   * The KV cache's dtype (default float32): float32, float16, bfloat16, or float8_e4m3fn (e4m3 codes with a
   * power-of-two scale per position and kv head, core/kv-fp8.ts: about half the bytes of bfloat16).
   */
  kvDtype?: DType;
  moeMode?: MoeMode;
  /** Progress: bytes read so far of `total`. */
  onProgress?: (done: number, total: number) => void;
  /** Called with the family before any weight is read (it throws to refuse one). */
  accept?: (family: ModelFamily, file: string) => void;
}

export interface LoadedModel<M extends CausalLM = CausalLM> {
  readonly model: M;
  readonly config: M['config'];
  /** undefined when the directory has no tokenizer.json, and for a Checkpoint source (its files are the caller's). */
  readonly tokenizer?: TextTokenizer;
  /** generation_config.json, when the directory has one: pass it as generate()'s `generationConfig`. */
  readonly generationConfig?: GenerationConfig;
  /** Bytes of tensor data read. */
  readonly checkpointBytes: number;
}

/**
 * The model an open Checkpoint holds (any model_type of SUPPORTED_MODEL_TYPES), its weights on `options.device`.
 * The checkpoint stays open (the caller's to close). In Node, loadModel also takes a directory, a Hub repo id or
 * `builtin:<preset>`.
 */
export async function loadModel(ck: Checkpoint, options: ModelFromCheckpointOptions = {}): Promise<LoadedModel> {
  if (ck.config === undefined) throw new CheckpointError('the checkpoint has no config.json', { file: ck.dir });
  if (options.kvDtype !== undefined && !(KV_DTYPES as readonly DType[]).includes(options.kvDtype))
    throw new DTypeError(`loadModel: kvDtype must be one of ${KV_DTYPES.join(', ')}, got ${options.kvDtype}`);
  const file = `${ck.dir}/config.json`;
  const family = familyOf(ck.config, file);
  options.accept?.(family, file);
  const config = family.parseConfig(ck.config, file);
  const total = ck.totalBytes;
  let done = 0;
  const weights = {
    device: options.device ?? getDefaultDevice(),
    quantize: options.dtype === 'fp8' ? ('float8_e4m3fn' as const) : options.dtype === 'int4' ? ('int4' as const) : undefined,
    groupSize: options.groupSize,
    dtype: options.dtype === 'fp8' || options.dtype === 'int4' ? undefined : options.dtype,
    onBytes: (n: number) => options.onProgress?.((done += n), total),
  };
  const maxSequence = options.maxSequence ?? Math.min(family.maxPositions(config), 4096);
  const model = await family.load(ck, config, weights, { maxSequence, kvDtype: options.kvDtype, moeMode: options.moeMode });
  return { model, config: model.config, checkpointBytes: total };
}

/**
 * The model the checkpoint holds, its weights on `options.device`.
 * @deprecated Use `loadModel(ck, options)`, whose `model` this is.
 */
export async function modelFromCheckpoint(ck: Checkpoint, options: ModelFromCheckpointOptions = {}): Promise<CausalLM> {
  return (await loadModel(ck, options)).model;
}
