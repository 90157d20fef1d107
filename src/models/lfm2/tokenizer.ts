// The tokenizer of the built-in random-weight 'lfm2-moe-tiny' model: a stand-in with LFM2's shape, NOT LFM2's real
// vocabulary. It has what code that loads a real LFM2 / LFM2-MoE checkpoint depends on: 65,536 tokens, LFM2's
// byte-level BPE pipeline (its pre-tokenizer regex, with the `(?i:...)` contraction group and 1-3 digit groups), its
// special and added tokens at their real ids, and its tokenizer_config.json (bos/eos/pad, clean-up, chat template).
// The text tokens are Qwen3's byte alphabet plus Qwen3's merges in rank order (its most frequent), kept only when
// both parts are kept, so every merge is reachable; they fill the ids LFM2 gives its text tokens.
//
// Sources: LiquidAI/LFM2-350M tokenizer_config.json (added_tokens_decoder, flags) and generation_config.json (bos 1,
// eos 7, pad 0); the LFM2-350M chat template; LFM2 GGUF metadata (tokenizer.ggml.pre "lfm2", ids 14-15 are plain
// `<|reserved_4|>`, `<|reserved_5|>` tokens, add_bos_token true); llama.cpp maps pre "lfm2" to the Llama 3 split.
// Not confirmed from LFM2's tokenizer.json and taken from the Llama 3 / LFM2-VL shape it follows: the normalizer
// (none), the decoder and post-processor, and placeholders at 64400-65535 (those ids hold no added token in LFM2).
import { qwen3TokenizerFiles } from '../../tokenizer/tokenizer.js';
import { addedToken, addedTokensDecoder, bpeModel } from '../../tokenizer/tokenizer-json.js';

export const LFM2_VOCAB_SIZE = 65536;

/** LFM2's pre-tokenizer split (the Llama 3 one). */
export const LFM2_SPLIT_REGEX =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/** LFM2's pre-tokenizer: the Split on LFM2_SPLIT_REGEX (tokens isolated), then byte-level without its own regex. */
export const LFM2_PRE_TOKENIZER = {
  type: 'Sequence',
  pretokenizers: [
    { type: 'Split', pattern: { Regex: LFM2_SPLIT_REGEX }, behavior: 'Isolated', invert: false },
    { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
  ],
};

/** LFM2's named special tokens by id; ids 16-500 are the special `<|reserved_{id - 10}|>` tokens. */
export const LFM2_SPECIAL_TOKENS: Readonly<Record<number, string>> = {
  0: '<|pad|>',
  1: '<|startoftext|>',
  2: '<|endoftext|>',
  3: '<|fim_pre|>',
  4: '<|fim_mid|>',
  5: '<|fim_suf|>',
  6: '<|im_start|>',
  7: '<|im_end|>',
  8: '<|tool_list_start|>',
  9: '<|tool_list_end|>',
  10: '<|tool_call_start|>',
  11: '<|tool_call_end|>',
  12: '<|tool_response_start|>',
  13: '<|tool_response_end|>',
  64394: '<|cot_start|>',
  64395: '<|cot_end|>',
  64396: '<|review_start|>',
  64397: '<|review_end|>',
  64398: '<|file_start|>',
  64399: '<|file_end|>',
};

/** Added tokens that are not special (LFM2 ships these two, matched anywhere in text before pre-tokenization). */
const LFM2_PLAIN_ADDED_TOKENS: Readonly<Record<number, string>> = { 64011: 'Mathias', 64014: 'python' };

const RESERVED_SPECIAL_IDS = { first: 16, last: 500 };
/** Ids of plain vocabulary placeholders, never produced from text: LFM2's 14-15, and what is left above 64399. */
const PLACEHOLDER_IDS = [14, 15, ...Array.from({ length: LFM2_VOCAB_SIZE - 64400 }, (_, k) => 64400 + k)];
const TEXT_IDS = { first: 501, end: 64394 };

/** `<|reserved_N|>`: N = id - 10 up to id 500 (as in LFM2), then counting on from 491 above 64399. */
const reservedName = (id: number): string => `<|reserved_${id < 64400 ? id - 10 : 491 + id - 64400}|>`;

/** LFM2's chat template (tools go to the system turn between `<|tool_list_start|>` / `<|tool_list_end|>`). */
export const LFM2_CHAT_TEMPLATE = `{{- bos_token -}}
{%- set system_prompt = "" -%}
{%- set ns = namespace(system_prompt="") -%}
{%- if messages[0]["role"] == "system" -%}
    {%- set ns.system_prompt = messages[0]["content"] -%}
    {%- set messages = messages[1:] -%}
{%- endif -%}
{%- if tools -%}
    {%- set ns.system_prompt = ns.system_prompt + ("\\n" if ns.system_prompt else "") + "List of tools: <|tool_list_start|>[" -%}
    {%- for tool in tools -%}
        {%- if tool is not string -%}
            {%- set tool = tool | tojson -%}
        {%- endif -%}
        {%- set ns.system_prompt = ns.system_prompt + tool -%}
        {%- if not loop.last -%}
            {%- set ns.system_prompt = ns.system_prompt + ", " -%}
        {%- endif -%}
    {%- endfor -%}
    {%- set ns.system_prompt = ns.system_prompt + "]<|tool_list_end|>" -%}
{%- endif -%}
{%- if ns.system_prompt -%}
    {{- "<|im_start|>system\\n" + ns.system_prompt + "<|im_end|>\\n" -}}
{%- endif -%}
{%- for message in messages -%}
    {{- "<|im_start|>" + message["role"] + "\\n" -}}
    {%- set content = message["content"] -%}
    {%- if content is not string -%}
        {%- set content = content | tojson -%}
    {%- endif -%}
    {%- if message["role"] == "tool" -%}
        {%- set content = "<|tool_response_start|>" + content + "<|tool_response_end|>" -%}
    {%- endif -%}
    {{- content + "<|im_end|>\\n" -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- "<|im_start|>assistant\\n" -}}
{%- endif -%}
`;

/** GPT-2's byte-to-character table: the 256 base tokens of every byte-level BPE. */
function byteLevelAlphabet(): string[] {
  const printable = (b: number): boolean => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const chars: string[] = [];
  let shifted = 0;
  for (let b = 0; b < 256; b++) chars.push(String.fromCodePoint(printable(b) ? b : 256 + shifted++));
  return chars;
}

/** tokenizer.json and tokenizer_config.json of the stand-in LFM2 tokenizer, by file name. */
export async function lfm2TokenizerFiles(): Promise<Record<string, string>> {
  const qwen3 = JSON.parse((await qwen3TokenizerFiles())['tokenizer.json']) as { model: { merges: (string | [string, string])[] } };

  const specials: Record<number, string> = { ...LFM2_SPECIAL_TOKENS };
  for (let id = RESERVED_SPECIAL_IDS.first; id <= RESERVED_SPECIAL_IDS.last; id++) specials[id] = reservedName(id);
  const tokens = new Array<string>(LFM2_VOCAB_SIZE);
  for (const [id, content] of Object.entries(specials)) tokens[Number(id)] = content;
  for (const id of PLACEHOLDER_IDS) tokens[id] = reservedName(id);
  const taken = new Set(tokens.filter((t) => t !== undefined));
  const fixedIds = new Map(Object.entries(LFM2_PLAIN_ADDED_TOKENS).map(([id, content]) => [content, Number(id)]));

  // Text ids in order, the fixed ones skipped; the byte alphabet first, then merge results in Qwen3's rank order.
  const freeIds: number[] = [];
  for (let id = TEXT_IDS.first; id < TEXT_IDS.end; id++) if (!(id in LFM2_PLAIN_ADDED_TOKENS)) freeIds.push(id);
  const kept = new Set<string>();
  let next = 0;
  for (const c of byteLevelAlphabet()) {
    tokens[freeIds[next++]] = c;
    kept.add(c);
  }
  const merges: [string, string][] = [];
  for (const merge of qwen3.model.merges) {
    if (next === freeIds.length) break;
    const [left, right] = typeof merge === 'string' ? (merge.split(' ') as [string, string]) : merge;
    const result = left + right;
    if (!kept.has(left) || !kept.has(right) || kept.has(result) || taken.has(result)) continue;
    kept.add(result);
    merges.push([left, right]);
    const fixed = fixedIds.get(result);
    if (fixed !== undefined) {
      tokens[fixed] = result;
      fixedIds.delete(result);
    } else {
      tokens[freeIds[next++]] = result;
    }
  }
  if (next < freeIds.length) throw new Error(`Qwen3's merges fill only ${next} of ${freeIds.length} LFM2 text ids`);
  // A plain added token that no kept merge builds still needs its vocabulary entry (LFM2 has one for each).
  for (const [content, id] of fixedIds) tokens[id] = content;

  const vocab: Record<string, number> = {};
  tokens.forEach((token, id) => (vocab[token] = id));
  const added = Object.entries({ ...specials, ...LFM2_PLAIN_ADDED_TOKENS })
    .map(([id, content]) => {
      const special = !(Number(id) in LFM2_PLAIN_ADDED_TOKENS);
      return addedToken(Number(id), content, special, !special);
    })
    .sort((a, b) => (a.id as number) - (b.id as number));

  const bos = LFM2_SPECIAL_TOKENS[1];
  const tokenizer = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: LFM2_PRE_TOKENIZER,
    post_processor: {
      type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
      pair: [
        { SpecialToken: { id: bos, type_id: 0 } },
        { Sequence: { id: 'A', type_id: 0 } },
        { SpecialToken: { id: bos, type_id: 1 } },
        { Sequence: { id: 'B', type_id: 1 } },
      ],
      special_tokens: { [bos]: { id: bos, ids: [1], tokens: [bos] } },
    },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: bpeModel(vocab, merges, null),
  };

  const config = {
    add_bos_token: true,
    add_eos_token: false,
    added_tokens_decoder: addedTokensDecoder(added),
    bos_token: bos,
    clean_up_tokenization_spaces: true,
    eos_token: LFM2_SPECIAL_TOKENS[7],
    extra_special_tokens: {},
    legacy: false,
    model_input_names: ['input_ids', 'attention_mask'],
    model_max_length: 1e30,
    pad_token: LFM2_SPECIAL_TOKENS[0],
    sp_model_kwargs: {},
    spaces_between_special_tokens: false,
    tokenizer_class: 'PreTrainedTokenizerFast',
    use_default_system_prompt: false,
    use_fast: true,
    chat_template: LFM2_CHAT_TEMPLATE,
  };
  return { 'tokenizer.json': JSON.stringify(tokenizer), 'tokenizer_config.json': JSON.stringify(config, null, 2) };
}
