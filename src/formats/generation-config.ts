// A checkpoint's generation_config.json (transformers' GenerationConfig): the model author's default sampling and
// extra eos ids. Only the fields tensorgpu honours are read, each validated; a field absent (or null) stays unset,
// so the caller's own default applies. Unlike transformers, an absent do_sample is "no opinion", not greedy: files
// written from the model config (`_from_model_config`) carry only token ids and should not switch sampling off.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CheckpointError } from '../core/errors.js';
import { Fields, type Json } from './config-fields.js';

export interface GenerationConfig {
  /** false: greedy unless the caller asks for sampling. */
  readonly doSample?: boolean;
  readonly temperature?: number;
  readonly topK?: number;
  readonly topP?: number;
  readonly minP?: number;
  readonly repetitionPenalty?: number;
  readonly maxNewTokens?: number;
  /** eos_token_id, an int or a list ([] when absent). */
  readonly eosTokenIds: readonly number[];
  /** The file it was read from. */
  readonly file: string;
}

function inRange(f: Fields, json: Json, key: string, ok: (v: number) => boolean, want: string): number | undefined {
  if (!f.has(key)) return undefined;
  const v = json[key];
  if (typeof v !== 'number' || !Number.isFinite(v) || !ok(v)) f.fail(key, want);
  return v;
}

/** Validates a parsed generation_config.json; `file` names it in errors. */
export function parseGenerationConfig(json: unknown, file: string): GenerationConfig {
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw new CheckpointError(`generation config must be a JSON object, got ${JSON.stringify(json)}`, { file });
  const j = json as Json;
  const f = new Fields(j, file);
  return {
    doSample: f.has('do_sample') ? f.bool('do_sample', false) : undefined,
    temperature: inRange(f, j, 'temperature', (v) => v >= 0, 'a number >= 0'),
    topK: f.has('top_k') ? f.int('top_k', undefined, 0) : undefined,
    topP: inRange(f, j, 'top_p', (v) => v > 0 && v <= 1, 'a number in (0, 1]'),
    minP: inRange(f, j, 'min_p', (v) => v >= 0 && v <= 1, 'a number in [0, 1]'),
    repetitionPenalty: inRange(f, j, 'repetition_penalty', (v) => v > 0, 'a number > 0'),
    maxNewTokens: f.has('max_new_tokens') ? f.int('max_new_tokens', undefined, 1) : undefined,
    eosTokenIds: f.ints('eos_token_id', 0),
    file,
  };
}

/** `dir`/generation_config.json parsed, or undefined when the folder has none. */
export async function readGenerationConfig(dir: string): Promise<GenerationConfig | undefined> {
  const file = join(dir, 'generation_config.json');
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new CheckpointError(`not valid JSON (${(e as Error).message})`, { file });
  }
  return parseGenerationConfig(json, file);
}
