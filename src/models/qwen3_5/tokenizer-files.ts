// The stand-in Qwen3.5 / Qwen3.6 tokenizer's files (tokenizer.ts) built from Qwen3's tokenizer.json read from disk:
// Node only (a page fetches Qwen3's tokenizer.json and calls qwen3_5TokenizerFilesFrom itself).
import { qwen3TokenizerFiles } from '../../tokenizer/tokenizer.js';
import { qwen3_5TokenizerFilesFrom } from './tokenizer.js';

export async function qwen3_5TokenizerFiles(): Promise<Record<string, string>> {
  return qwen3_5TokenizerFilesFrom((await qwen3TokenizerFiles())['tokenizer.json']);
}
