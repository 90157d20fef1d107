// Built-in random-weight models in the exact Hugging Face layout with a real-shaped tokenizer, generated once into
// the temp directory: `tensorgpu generate` and `tensorgpu bench` run on a fresh machine with nothing to download.
// The default is qwen3-moe-tiny (the real Qwen3 tokenizer); `--model builtin:lfm2-moe-tiny` (or
// `loadModel('builtin:lfm2-moe-tiny')`) picks another preset. The presets are their families' (<family>/presets.ts,
// collected by families.ts); what is Node's here is writing them to disk with the tokenizer files each family's
// presets ship with.
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { lfm2TokenizerFiles } from './lfm2/tokenizer.js';
import { qwen3TokenizerFiles } from '../tokenizer/tokenizer.js';
import { qwen3_5TokenizerFiles } from './qwen3_5/tokenizer-files.js';
import { ensureGeneratedDir } from '../formats/generated-dir.js';
import { presetNamed } from './families.js';
import type { RandomWeightDType } from './random-weights.js';

export const DEFAULT_PRESET = 'qwen3-moe-tiny';
/** `--model builtin:<preset>`. */
export const BUILTIN_PREFIX = 'builtin:';
/** tokenizer.json and tokenizer_config.json each family's presets ship with, by family name. */
const TOKENIZER_FILES: Record<string, () => Promise<Record<string, string>>> = {
  Qwen3: qwen3TokenizerFiles,
  LFM2: lfm2TokenizerFiles,
  'Qwen3.5': qwen3_5TokenizerFiles,
};

/**
 * The tokenizer files (tokenizer.json, tokenizer_config.json) a preset's family ships with: written beside its
 * weights by the built-in models and `checkpoint generate`, so the folder loads as a whole model.
 */
export async function presetTokenizerFiles(preset: string): Promise<Record<string, string>> {
  return TOKENIZER_FILES[presetNamed(preset).family.name]!();
}

/** Bumped whenever a generator or preset changes what is written (6: outputSpread). */
const LAYOUT_VERSION = 6;

/** The directory of a built-in preset, generating it first if needed (a few seconds, once). */
export async function ensureBuiltinModel(
  options: { preset?: string; dtype?: RandomWeightDType; seed?: number; onNotice?: (line: string) => void } = {},
): Promise<string> {
  const preset = options.preset ?? DEFAULT_PRESET;
  const dtype = options.dtype ?? 'bfloat16';
  const seed = options.seed ?? 1;
  const { family, config } = presetNamed(preset);
  const dir = join(tmpdir(), `tensorgpu-${preset}-${dtype}-seed${seed}-v${LAYOUT_VERSION}`);
  return ensureGeneratedDir(
    dir,
    async (staging) => {
      // outputSpread: logits spread like a trained model's, so the random text varies (random-weights.ts).
      await family.writeRandom(staging, config, { dtype, seed, outputSpread: true, extraFiles: await presetTokenizerFiles(preset) });
    },
    () => options.onNotice?.(`generating the built-in ${preset} model (random ${dtype} weights, ${family.name}-shaped tokenizer) in ${dir}`),
  );
}

/** `--model`: a directory as is, `builtin:<preset>` generated on demand, nothing for the default preset. */
export async function resolveModelDir(model: string | undefined, onNotice?: (line: string) => void): Promise<string> {
  if (model === undefined) return ensureBuiltinModel({ onNotice });
  if (model.startsWith(BUILTIN_PREFIX)) return ensureBuiltinModel({ preset: model.slice(BUILTIN_PREFIX.length), onNotice });
  return model;
}
