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
  /** An assistant turn's earlier thinking (Qwen3 templates render it inside `<think>`). */
  reasoning_content?: string;
  /** An assistant turn's tool calls, arguments as objects (templates iterate them as mappings). */
  tool_calls?: readonly ChatToolCall[];
  /** A tool turn: the id of the call it answers, and the tool's name. */
  tool_call_id?: string;
  name?: string;
}

/** A tool call in a chat history, in the shape transformers' apply_chat_template takes. */
export interface ChatToolCall {
  id?: string;
  type: 'function';
  function: { name: string; arguments: Record<string, unknown> };
}

export interface ChatTemplateOptions {
  /** The template's enable_thinking (default false). */
  enableThinking?: boolean;
  /** Tool definitions (`{type: 'function', function: {name, description, parameters}}`), the template's `tools`. */
  tools?: readonly object[];
  /** More template variables (a request's chat_template_kwargs, reasoning_effort). */
  variables?: Readonly<Record<string, unknown>>;
}

/**
 * What a grammar engine needs to turn token ids into text: every token's raw string by id (added and special tokens
 * included; '' where an id has none) and how the model spells bytes in them. `byte_level`: GPT-2's byte-to-unicode
 * map (Qwen, Llama 3, LFM2); `byte_fallback`: SentencePiece's ▁ for a space and <0xAB> tokens for raw bytes; `raw`:
 * tokens are their text.
 */
export interface TokenizerVocabulary {
  readonly tokens: readonly string[];
  readonly vocabType: 'byte_level' | 'byte_fallback' | 'raw';
  /** The tokenizer prepends a space (▁) to the text it encodes (older SentencePiece models). */
  readonly prependSpace: boolean;
  /** Ids of special tokens (never produced by a grammar's text). */
  readonly specialIds: readonly number[];
}

/** Whether a tokenizer.json component (or one inside a Sequence) has this type. */
function hasComponent(c: unknown, type: string): boolean {
  if (!c || typeof c !== 'object') return false;
  const o = c as { type?: unknown; decoders?: unknown; normalizers?: unknown; pretokenizers?: unknown };
  if (o.type === type) return true;
  const inner = o.decoders ?? o.normalizers ?? o.pretokenizers;
  return Array.isArray(inner) && inner.some((x) => hasComponent(x, type));
}

export class TextTokenizer {
  private readonly tokenizer: Tokenizer;
  /** The pieces of tokenizer.json that say how tokens spell bytes (for vocabulary()). */
  private readonly spelling: { decoder: unknown; normalizer: unknown; preTokenizer: unknown; byteFallback: boolean; special: number[] };
  private vocab?: TokenizerVocabulary;
  private readonly template?: Template;
  /** Ids of the tokenizer's eos token (and <|im_end|>-style end-of-turn tokens named in the config). */
  readonly eosTokenIds: readonly number[];

  /** From the parsed tokenizer.json and tokenizer_config.json (in a browser: fetched, or picked by the user). */
  constructor(
    json: Record<string, unknown>,
    readonly config: Record<string, unknown>,
  ) {
    this.tokenizer = new Tokenizer(withExactCaseInsensitiveRegexes(json), config);
    const added = Array.isArray(json.added_tokens) ? (json.added_tokens as { id: number; special?: boolean }[]) : [];
    this.spelling = {
      decoder: json.decoder,
      normalizer: json.normalizer,
      preTokenizer: json.pre_tokenizer,
      byteFallback: (json.model as { byte_fallback?: boolean } | undefined)?.byte_fallback === true,
      special: added.filter((t) => t.special).map((t) => t.id),
    };
    const chat = config.chat_template;
    if (typeof chat === 'string') this.template = new Template(chat);
    const eos = typeof config.eos_token === 'string' ? config.eos_token : (config.eos_token as { content?: string } | undefined)?.content;
    this.eosTokenIds = eos ? this.tokenizer.encode(eos, { add_special_tokens: false }).ids : [];
  }

  /** Every token's raw string by id and how tokens spell bytes (computed once): see TokenizerVocabulary. */
  vocabulary(): TokenizerVocabulary {
    if (this.vocab) return this.vocab;
    const byId = this.tokenizer.get_vocab(true);
    let size = 0;
    for (const id of byId.values()) size = Math.max(size, id + 1);
    const tokens = new Array<string>(size).fill('');
    for (const [token, id] of byId) tokens[id] = token;
    const { decoder, normalizer, preTokenizer, byteFallback, special } = this.spelling;
    const vocabType = hasComponent(decoder, 'ByteLevel') ? 'byte_level' : byteFallback || hasComponent(decoder, 'ByteFallback') ? 'byte_fallback' : 'raw';
    const metaspace = preTokenizer as { type?: string; prepend_scheme?: string; add_prefix_space?: boolean } | undefined;
    const prependSpace =
      hasComponent(normalizer, 'Prepend') ||
      (metaspace?.type === 'Metaspace' &&
        (metaspace.prepend_scheme === 'always' || (metaspace.prepend_scheme === undefined && metaspace.add_prefix_space === true)));
    this.vocab = { tokens, vocabType, prependSpace, specialIds: special };
    return this.vocab;
  }

  get hasChatTemplate(): boolean {
    return this.template !== undefined;
  }

  /** The chat template's source (empty without one): to ask which variables it reads. */
  get chatTemplateSource(): string {
    return typeof this.config.chat_template === 'string' ? this.config.chat_template : '';
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
  applyChatTemplate(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}): string {
    if (!this.template) throw new CheckpointError('the tokenizer config has no chat_template; pass raw text instead');
    return this.template.render({
      ...options.variables,
      messages,
      ...(options.tools && options.tools.length > 0 ? { tools: options.tools } : {}),
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
