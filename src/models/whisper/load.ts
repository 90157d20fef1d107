// Loading a Whisper model (Node): a checkpoint directory, a Hugging Face repo id (openai/whisper-tiny ...) fetched
// into the shared cache, or `builtin:whisper-tiny` generated once into the temp directory; an open Checkpoint
// (a page's) through whisperFromCheckpoint. The tokenizer comes from the folder's tokenizer.json.
import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CheckpointError } from '../../core/errors.js';
import { Checkpoint } from '../../formats/checkpoint.js';
import { ensureGeneratedDir } from '../../formats/generated-dir.js';
import { resolveModelPath, type HubOptions } from '../../hub/download.js';
import type { DeviceName } from '../../runtime/backend.js';
import { TextTokenizer } from '../../tokenizer/tokenizer.js';
import { whisperFromCheckpoint, type WhisperWeightDType } from './from-checkpoint.js';
import type { WhisperModel } from './model.js';
import { WHISPER_PRESETS } from './presets.js';
import { writeRandomWhisperCheckpoint } from './random-checkpoint.js';
import { whisperTokenizerFiles } from './tokenizer-files.js';
import { WhisperTokenizer } from './tokenizer.js';

export { whisperFromCheckpoint, type WhisperFromCheckpointOptions, type WhisperWeightDType } from './from-checkpoint.js';

export const DEFAULT_WHISPER_MODEL = 'builtin:whisper-tiny';
const BUILTIN = 'builtin:';
/** Bumped whenever the generator or preset changes what is written. */
const LAYOUT_VERSION = 1;

export interface WhisperLoadOptions {
  device?: DeviceName;
  /** A float dtype to convert the weights to, or 'fp8' / 'int4' to quantize the projections (default: as stored). */
  dtype?: WhisperWeightDType;
  /** int4 group size along K: 32, 64 or 128 (default 128). */
  groupSize?: number;
  /** Decoder positions the cache holds (default max_target_positions). */
  maxSequence?: number;
  hub?: HubOptions;
  onNotice?: (line: string) => void;
}

export interface LoadedWhisper {
  model: WhisperModel;
  tokenizer: WhisperTokenizer;
  dir: string;
}

/** The directory of a built-in Whisper preset, generated first if needed (a second or so, once). */
export async function ensureBuiltinWhisper(preset: string, onNotice?: (line: string) => void): Promise<string> {
  const config = WHISPER_PRESETS[preset];
  if (!config) throw new RangeError(`unknown Whisper preset '${preset}' (presets: ${Object.keys(WHISPER_PRESETS).join(', ')})`);
  const dir = join(tmpdir(), `tensorgpu-${preset}-float32-seed1-v${LAYOUT_VERSION}`);
  return ensureGeneratedDir(
    dir,
    async (staging) => writeRandomWhisperCheckpoint(staging, config, { dtype: 'float32', seed: 1, extraFiles: await whisperTokenizerFiles() }),
    () => onNotice?.(`generating the built-in ${preset} model (random float32 weights, Whisper-shaped tokenizer) in ${dir}`),
  );
}

/** Whether the model is multilingual: generation_config.json's is_multilingual, else openai's n_vocab >= 51865. */
function isMultilingual(dir: string, vocabSize: number): boolean {
  const path = join(dir, 'generation_config.json');
  if (existsSync(path)) {
    const json = JSON.parse(readFileSync(path, 'utf8')) as { is_multilingual?: unknown };
    if (typeof json.is_multilingual === 'boolean') return json.is_multilingual;
  }
  return vocabSize >= 51865;
}

/** A Whisper model and its tokenizer from a folder, a repo id or `builtin:<preset>`. */
export async function loadWhisper(source: string = DEFAULT_WHISPER_MODEL, options: WhisperLoadOptions = {}): Promise<LoadedWhisper> {
  const dir = source.startsWith(BUILTIN)
    ? await ensureBuiltinWhisper(source.slice(BUILTIN.length), options.onNotice)
    : await resolveModelPath(source, options.hub);
  await using ck = await Checkpoint.open(dir);
  if (!existsSync(join(dir, 'tokenizer.json'))) throw new CheckpointError('a Whisper checkpoint needs its tokenizer.json', { file: dir });
  const text = TextTokenizer.fromDirectory(dir);
  const model = await whisperFromCheckpoint(ck, options);
  try {
    return { model, tokenizer: new WhisperTokenizer(text, isMultilingual(dir, model.config.vocabSize)), dir };
  } catch (e) {
    model.dispose();
    throw e;
  }
}
