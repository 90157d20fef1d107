// loadModel, the one way to load a model (Node): a checkpoint directory, a Hugging Face repo id fetched into the
// shared cache, `builtin:<preset>` generated on demand, or an open Checkpoint. Every form ends in from-checkpoint.ts'
// loadModel (the browser entry's); a folder adds its tokenizer and generation_config.json. resolveModelSource is
// the string forms' resolution, shared with the CLI's `--model`.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { resolveModelPath, type HubOptions } from '../hub/download.js';
import { HubError } from '../hub/hub-errors.js';
import { parseRepoSpec } from '../hub/repo-spec.js';
import { CheckpointError } from '../core/errors.js';
import { Checkpoint } from '../formats/checkpoint.js';
import { TextTokenizer } from '../tokenizer/tokenizer.js';
import { readGenerationConfig } from '../formats/generation-config.js';
import { presetNamed, type ModelFamily } from './families.js';
import { BUILTIN_PREFIX, resolveModelDir } from './builtin.js';
import { loadModel as loadFromCheckpoint, type LoadedModel, type ModelFromCheckpointOptions } from './from-checkpoint.js';

export type { LoadedModel };

export interface LoadModelOptions extends ModelFromCheckpointOptions {
  /** How a Hugging Face repo id given instead of a folder is fetched (cache, token, offline, download progress). */
  hub?: HubOptions;
  /** A line about what was chosen (a built-in model being generated, a file's folder used instead of the file). */
  onNotice?: (line: string) => void;
}

const MODEL_FOLDER = 'a model folder holds config.json, model.safetensors (or its shards and index) and tokenizer.json';

/** Names that are files, never Hub repo ids, even when they are shaped like org/name. */
const FILE_NAME = /\.(safetensors|json|bin|gguf|pt|pth|ckpt)$/i;

/**
 * The local model folder `source` names, checked to be one (config.json present) before anything is read:
 * - undefined: the built-in default preset; `builtin:<preset>`: that preset, generated once into the temp directory;
 * - a folder on disk, as is; a file in a model folder (dir/model.safetensors): that folder, with a notice;
 * - otherwise a Hub repo id (org/name[@revision][/subfolder]), fetched into the cache. What is neither a folder here
 *   nor a repo id (or is a repo id the Hub cannot give) is reported as a missing folder, with the Hub's reason.
 */
export async function resolveModelSource(source: string | undefined, options: { hub?: HubOptions; onNotice?: (line: string) => void } = {}): Promise<string> {
  if (source === undefined || source.startsWith(BUILTIN_PREFIX)) return resolveModelDir(source, options.onNotice);
  const local = localSource(source, options.onNotice);
  if (typeof local === 'string') return local;
  let dir: string;
  try {
    dir = await resolveModelPath(source, options.hub);
  } catch (e) {
    if (!(e instanceof HubError)) throw e;
    throw new HubError(`${source}: no such folder here, and as a Hub repo id: ${e.message}`, { repo: e.repo, status: e.status });
  }
  return checkedFolder(dir);
}

/**
 * Throws what resolveModelSource would for `source` without fetching or generating anything: an unknown preset, a
 * missing folder that is no repo id, a folder that is not a model's. Commands call it before they load anything.
 */
export function checkModelSource(source: string | undefined): void {
  if (source === undefined) return;
  if (source.startsWith(BUILTIN_PREFIX)) presetNamed(source.slice(BUILTIN_PREFIX.length));
  else localSource(source);
}

/** A folder with config.json, as is. */
function checkedFolder(dir: string): string {
  if (!existsSync(join(dir, 'config.json'))) {
    const files = readdirSync(dir);
    const what = files.length === 0 ? 'it is empty' : `it holds ${files.slice(0, 4).join(', ')}${files.length > 4 ? ', ...' : ''}`;
    throw new CheckpointError(`not a model folder: no config.json (${what}); ${MODEL_FOLDER}`, { file: dir });
  }
  return dir;
}

/** The model folder `spec` names on this machine, or the Hub repo id it must be (to be fetched). */
function localSource(spec: string, onNotice?: (line: string) => void): string | { repo: string } {
  const stat = statSync(spec, { throwIfNoEntry: false });
  if (stat?.isDirectory()) return checkedFolder(spec);
  if (stat) {
    const folder = dirname(spec);
    if (!existsSync(join(folder, 'config.json'))) {
      throw new CheckpointError(`a file, not a model folder: pass the folder that holds it (${MODEL_FOLDER})`, { file: spec });
    }
    onNotice?.(`${spec} is a file: loading the model folder that holds it, ${folder}`);
    return folder;
  }
  let repo: ReturnType<typeof parseRepoSpec>;
  try {
    repo = FILE_NAME.test(spec) ? undefined : parseRepoSpec(spec);
  } catch {
    repo = undefined;
  }
  if (repo) return { repo: repo.repo };
  const parent = dirname(spec);
  const where = parent !== '.' && !existsSync(parent) ? `; ${parent} does not exist either` : '';
  const hint = spec.includes('/') ? '' : '; a Hub repo id has the form org/name';
  const what = FILE_NAME.test(spec) ? 'no such file (pass the model folder, not a file in it: ' : 'no such folder (';
  throw new CheckpointError(`${what}${MODEL_FOLDER})${where}${hint}`, { file: spec });
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
  const dir = await resolveModelSource(source, options);
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
