// Opens a Hugging Face checkpoint directory of any supported family (models/families.ts, by config.json's
// model_type): typed config, weights streamed onto the device, tokenizer from the folder.
import { resolveModelPath, type HubOptions } from '../hub/download.js';
import { Checkpoint } from '../formats/checkpoint.js';
import { TextTokenizer } from '../tokenizer/tokenizer.js';
import { readGenerationConfig, type GenerationConfig } from '../generate/generation-config.js';
import type { CausalLM } from './causal-lm.js';
import type { ModelFamily } from './families.js';
import { modelFromCheckpoint, type ModelFromCheckpointOptions } from './from-checkpoint.js';

export interface LoadModelOptions extends Omit<ModelFromCheckpointOptions, 'accept'> {
  /** How a Hugging Face repo id given instead of a folder is fetched (cache, token, offline, download progress). */
  hub?: HubOptions;
}

export interface LoadedModel<M extends CausalLM = CausalLM> {
  readonly model: M;
  readonly config: M['config'];
  /** undefined when the directory has no tokenizer.json. */
  readonly tokenizer?: TextTokenizer;
  /** generation_config.json, when the directory has one: pass it as generate()'s `generationConfig`. */
  readonly generationConfig?: GenerationConfig;
  /** Bytes of tensor data read from disk. */
  readonly checkpointBytes: number;
}

/** Loads the model a checkpoint directory holds (qwen3, qwen3_moe, lfm2, lfm2_moe). */
export async function loadModel(dir: string, options: LoadModelOptions = {}): Promise<LoadedModel> {
  return loadModelOf(dir, options);
}

/** loadModel, with `accept` called on the family before any weight is read (it throws to refuse one). */
export async function loadModelOf(source: string, options: LoadModelOptions, accept?: (family: ModelFamily, file: string) => void): Promise<LoadedModel> {
  // A folder that exists wins; else `org/name[@revision][/subfolder]` is fetched into the Hugging Face cache.
  const dir = await resolveModelPath(source, options.hub);
  await using ck = await Checkpoint.open(dir);
  const total = ck.totalBytes;
  const generationConfig = await readGenerationConfig(dir);
  const model = await modelFromCheckpoint(ck, { ...options, accept });
  let tokenizer: TextTokenizer | undefined;
  try {
    tokenizer = TextTokenizer.fromDirectory(dir);
  } catch {
    tokenizer = undefined;
  }
  return { model, config: model.config, tokenizer, generationConfig, checkpointBytes: total };
}
