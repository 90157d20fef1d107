// loadModel, the one way to load a model (Node): a checkpoint directory, a Hugging Face repo id fetched into the
// shared cache, `builtin:<preset>` generated on demand, or an open Checkpoint. Every form ends in from-checkpoint.ts'
// loadModel (the browser entry's); a folder adds its tokenizer and generation_config.json.
import { resolveModelPath, type HubOptions } from '../hub/download.js';
import { Checkpoint } from '../formats/checkpoint.js';
import { TextTokenizer } from '../tokenizer/tokenizer.js';
import { readGenerationConfig } from '../formats/generation-config.js';
import type { ModelFamily } from './families.js';
import { resolveModelDir } from './builtin.js';
import { loadModel as loadFromCheckpoint, type LoadedModel, type ModelFromCheckpointOptions } from './from-checkpoint.js';

export type { LoadedModel };

export interface LoadModelOptions extends ModelFromCheckpointOptions {
  /** How a Hugging Face repo id given instead of a folder is fetched (cache, token, offline, download progress). */
  hub?: HubOptions;
}

/**
 * The model `source` holds, any supported model_type (qwen3, qwen3_moe, lfm2, lfm2_moe, qwen3_5, qwen3_5_moe):
 * - a checkpoint directory (config.json, safetensors, tokenizer.json, generation_config.json);
 * - a Hugging Face repo id, `org/name[@revision][/subfolder]`, fetched (what is missing of it) into the Hub cache;
 * - `builtin:<preset>` (presetNames()), random weights generated once into the temp directory;
 * - an open Checkpoint (a URL, picked files, in memory), left open; the result then has no tokenizer.
 * A folder that exists wins over a repo id of the same name.
 */
export async function loadModel(source: string | Checkpoint, options: LoadModelOptions = {}): Promise<LoadedModel> {
  if (typeof source !== 'string') return loadFromCheckpoint(source, options);
  const dir = await resolveModelPath(await resolveModelDir(source), options.hub);
  await using ck = await Checkpoint.open(dir);
  // generation_config.json is read first: a malformed one fails before any weight is.
  const generationConfig = await readGenerationConfig(dir);
  const loaded = await loadFromCheckpoint(ck, options);
  let tokenizer: TextTokenizer | undefined;
  try {
    tokenizer = TextTokenizer.fromDirectory(dir);
  } catch {
    tokenizer = undefined;
  }
  return { ...loaded, tokenizer, generationConfig };
}

/**
 * loadModel, with `accept` called on the family before any weight is read (it throws to refuse one).
 * @deprecated Use `loadModel(source, { ...options, accept })`.
 */
export async function loadModelOf(source: string, options: LoadModelOptions, accept?: (family: ModelFamily, file: string) => void): Promise<LoadedModel> {
  return loadModel(source, accept ? { ...options, accept } : options);
}
