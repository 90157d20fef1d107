// Text <-> token ids through Hugging Face's tokenizers.js (tokenizer.json + tokenizer_config.json) and chat
// prompts through the checkpoint's own Jinja chat template (@huggingface/jinja), so prompts are formatted exactly
// as transformers' apply_chat_template formats them. No file system here (the browser entry uses it as is);
// tokenizer.ts reads the files in Node.
import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';
import { CheckpointError } from '../core/errors.js';
import { withExactCaseInsensitiveRegexes } from './regex-compat.js';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
}

export class TextTokenizer {
  private readonly tokenizer: Tokenizer;
  private readonly template?: Template;
  /** Ids of the tokenizer's eos token (and <|im_end|>-style end-of-turn tokens named in the config). */
  readonly eosTokenIds: readonly number[];

  /** From the parsed tokenizer.json and tokenizer_config.json (in a browser: fetched, or picked by the user). */
  constructor(
    json: Record<string, unknown>,
    readonly config: Record<string, unknown>,
  ) {
    this.tokenizer = new Tokenizer(withExactCaseInsensitiveRegexes(json), config);
    const chat = config.chat_template;
    if (typeof chat === 'string') this.template = new Template(chat);
    const eos = typeof config.eos_token === 'string' ? config.eos_token : (config.eos_token as { content?: string } | undefined)?.content;
    this.eosTokenIds = eos ? this.tokenizer.encode(eos, { add_special_tokens: false }).ids : [];
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
    return this.tokenizer.decode([...ids], {
      skip_special_tokens: skipSpecialTokens,
      ...(options.cleanUpSpaces === false ? { clean_up_tokenization_spaces: false } : {}),
    });
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
