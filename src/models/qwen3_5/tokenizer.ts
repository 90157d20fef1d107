// The tokenizer of the built-in random-weight Qwen3.5 / Qwen3.6 presets ('qwen3.6-moe-tiny', 'qwen3.5-tiny'): a
// stand-in with the release's shape, NOT its real vocabulary. It has what code that loads a real Qwen3.5 / Qwen3.6
// checkpoint (model_type qwen3_5 / qwen3_5_moe) depends on: the 248,320-row vocabulary, the release's byte-level BPE
// pipeline (NFC, its pre-tokenizer regex, which keeps combining marks with their letters, single digits), its 33
// added tokens at their real ids 248044-248076 (21 special, 12 not), its tokenizer_config.json (no bos, eos
// <|im_end|>, pad <|endoftext|>, no clean-up) and its chat template (thinking on by default, opened with `<think>\n`).
// The text tokens are Qwen3's vocabulary and merges at Qwen3's ids 0-151642 (its byte alphabet first, then its merge
// results in rank order); placeholders `<|placeholder_{id}|>`, which no merge builds, fill the rest of the ids the
// release gives its text tokens (151643-248043). Ids 248077-248319 hold no token, as in the release (the embedding
// is padded past the tokenizer's 248,077 tokens); they decode to nothing.
//
// Sources:
// - huggingface/transformers src/transformers/models/qwen3_5/tokenization_qwen3_5.py @ dd7a585c07f2 (Qwen3_5Tokenizer):
//   the pre-tokenizer regex, NFC, a ByteLevel pre-tokenizer without its own regex, a default ByteLevel decoder, BPE
//   with byte_fallback off; src/transformers/models/qwen3_5/configuration_qwen3_5.py @ 008e57439125: vocab_size
//   248320, image 248056, video 248057, vision_start 248053, vision_end 248054.
// - ggml-org/llama.cpp src/llama-vocab.cpp @ 00ad355e009e (LLAMA_VOCAB_PRE_TYPE_QWEN35): the same regex, quoted there as
//   "original regex from tokenizer.json".
// - The release's added tokens 248044-248076 and their special flags, tokenizer_config.json fields, generation_config
//   (bos 248044, eos [248046, 248044], pad 248044; config.json's text_config eos 248044) and len(tokenizer) 248077:
//   agreeing copies in public test fixtures and GGUF metadata dumps of Qwen/Qwen3.5-27B, -35B-A3B, -397B-A17B and
//   Qwen/Qwen3.6-27B, -35B-A3B (GGUF token_type: 248044 normal, then 14 control, 2 user-defined, 6 control, 4
//   user-defined, 7 control, 243 unused; merges 247587; tokenizer.ggml.pre "qwen35").
// - The chat template: Qwen/Qwen3.6-35B-A3B's and Qwen/Qwen3.6-27B's chat_template.jinja (27B @ 6a9e13bd6fc8; 7,764
//   bytes, SHA-256 e84f32a23fdda27689f868aa4a1a5621f41133e51a48d7f3efcbea2839574259, the hash public manifests pin for
//   both), transcribed from verbatim public copies: QWEN3_5_CHAT_TEMPLATE hashes to exactly that. The release ships it
//   as chat_template.jinja; the stand-in puts it in tokenizer_config.json, where TextTokenizer reads it. Qwen3.5's
//   (Qwen/Qwen3.5-9B @ c202236235762e, -27B, -35B-A3B; 7,756 bytes, SHA-256
//   a4aee8afcf2e0711942cf848899be66016f8d14a889ff9ede07bca099c28f715, which this text with its two lines swapped back
//   also hashes to) differs in two lines: no `preserve_thinking` switch (earlier turns keep their reasoning only after
//   the last user query), and a tool call's arguments go through `| string` unless they are mappings or lists. Unlike
//   Qwen3's template, both open the assistant turn with `<think>\n` when thinking is on (Qwen3 adds nothing there)
//   and with `<think>\n\n</think>\n\n` when it is off.
// Not confirmed, and taken from the transformers class defaults or Qwen3's files: the post-processor (Qwen3's
// ByteLevel), the decoder's flags, the ByteLevel pre-tokenizer's trim_offsets, tokenizer_class (manifests of
// Qwen3.5-9B and Qwen3.6-27B list Qwen2Tokenizer) and the extra *_token fields of tokenizer_config.json; whether the
// release's tokenizer.json lists the 7 audio / TTS tokens 248070-248076 or only its tokenizer_config.json does (copies
// disagree; the stand-in lists all 33 in both, as TextTokenizer reads only tokenizer.json's). The release's text
// vocabulary itself (248,044 tokens) is not reproduced.
import { addedToken, addedTokensDecoder, bpeModel } from '../../tokenizer/tokenizer-json.js';

/** Rows of the release's embedding and lm_head (config.json's vocab_size). */
export const QWEN3_5_VOCAB_SIZE = 248320;
/** Tokens the release's tokenizer has (len(tokenizer)): the text tokens, then the 33 added tokens. */
export const QWEN3_5_TOKENIZER_SIZE = 248077;
/** Ids the release gives its BPE text tokens: 0 .. QWEN3_5_TEXT_TOKENS - 1. */
export const QWEN3_5_TEXT_TOKENS = 248044;
/** The release's eos ids (generation_config.json): <|im_end|>, <|endoftext|>. */
export const QWEN3_5_EOS_TOKEN_IDS: readonly number[] = [248046, 248044];

/** Qwen3.5's pre-tokenizer split: Qwen2's, with combining marks (\p{M}) kept with letters and out of punctuation runs. */
export const QWEN3_5_SPLIT_REGEX =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/** Qwen3.5's pre-tokenizer: the Split on QWEN3_5_SPLIT_REGEX (tokens isolated), then byte-level without its own regex. */
export const QWEN3_5_PRE_TOKENIZER = {
  type: 'Sequence',
  pretokenizers: [
    { type: 'Split', pattern: { Regex: QWEN3_5_SPLIT_REGEX }, behavior: 'Isolated', invert: false },
    { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
  ],
};

/** The release's added tokens from id 248044 on, in id order, with their `special` flags. */
const ADDED_TOKENS: readonly (readonly [string, boolean])[] = [
  ['<|endoftext|>', true],
  ['<|im_start|>', true],
  ['<|im_end|>', true],
  ['<|object_ref_start|>', true],
  ['<|object_ref_end|>', true],
  ['<|box_start|>', true],
  ['<|box_end|>', true],
  ['<|quad_start|>', true],
  ['<|quad_end|>', true],
  ['<|vision_start|>', true],
  ['<|vision_end|>', true],
  ['<|vision_pad|>', true],
  ['<|image_pad|>', true],
  ['<|video_pad|>', true],
  ['<tool_call>', false],
  ['</tool_call>', false],
  ['<|fim_prefix|>', false],
  ['<|fim_middle|>', false],
  ['<|fim_suffix|>', false],
  ['<|fim_pad|>', false],
  ['<|repo_name|>', false],
  ['<|file_sep|>', false],
  ['<tool_response>', false],
  ['</tool_response>', false],
  ['<think>', false],
  ['</think>', false],
  ['<|audio_start|>', true],
  ['<|audio_end|>', true],
  ['<tts_pad>', true],
  ['<tts_text_bos>', true],
  ['<tts_text_eod>', true],
  ['<tts_text_bos_single>', true],
  ['<|audio_pad|>', true],
];

/** The release's added tokens by id (248044-248076). */
export const QWEN3_5_ADDED_TOKENS: Readonly<Record<number, string>> = Object.fromEntries(
  ADDED_TOKENS.map(([content], k) => [QWEN3_5_TEXT_TOKENS + k, content]),
);

/** The text-token id a placeholder fills (ids Qwen3's vocabulary does not reach). */
const placeholder = (id: number): string => `<|placeholder_${id}|>`;

/** The chat template of Qwen/Qwen3.6-35B-A3B (see the header for Qwen3.5's two differences). */
export const QWEN3_5_CHAT_TEMPLATE = String.raw`{%- set image_count = namespace(value=0) %}
{%- set video_count = namespace(value=0) %}
{%- macro render_content(content, do_vision_count, is_system_content=false) %}
    {%- if content is string %}
        {{- content }}
    {%- elif content is iterable and content is not mapping %}
        {%- for item in content %}
            {%- if 'image' in item or 'image_url' in item or item.type == 'image' %}
                {%- if is_system_content %}
                    {{- raise_exception('System message cannot contain images.') }}
                {%- endif %}
                {%- if do_vision_count %}
                    {%- set image_count.value = image_count.value + 1 %}
                {%- endif %}
                {%- if add_vision_id %}
                    {{- 'Picture ' ~ image_count.value ~ ': ' }}
                {%- endif %}
                {{- '<|vision_start|><|image_pad|><|vision_end|>' }}
            {%- elif 'video' in item or item.type == 'video' %}
                {%- if is_system_content %}
                    {{- raise_exception('System message cannot contain videos.') }}
                {%- endif %}
                {%- if do_vision_count %}
                    {%- set video_count.value = video_count.value + 1 %}
                {%- endif %}
                {%- if add_vision_id %}
                    {{- 'Video ' ~ video_count.value ~ ': ' }}
                {%- endif %}
                {{- '<|vision_start|><|video_pad|><|vision_end|>' }}
            {%- elif 'text' in item %}
                {{- item.text }}
            {%- else %}
                {{- raise_exception('Unexpected item type in content.') }}
            {%- endif %}
        {%- endfor %}
    {%- elif content is none or content is undefined %}
        {{- '' }}
    {%- else %}
        {{- raise_exception('Unexpected content type.') }}
    {%- endif %}
{%- endmacro %}
{%- if not messages %}
    {{- raise_exception('No messages provided.') }}
{%- endif %}
{%- if tools and tools is iterable and tools is not mapping %}
    {{- '<|im_start|>system\n' }}
    {{- "# Tools\n\nYou have access to the following functions:\n\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>" }}
    {{- '\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n- Required parameters MUST be specified\n- You may provide optional reasoning for your function call in natural language BEFORE the function call, but NOT after\n- If there is no function call available, answer the question like normal with your current knowledge and do not tell the user about function calls\n</IMPORTANT>' }}
    {%- if messages[0].role == 'system' %}
        {%- set content = render_content(messages[0].content, false, true)|trim %}
        {%- if content %}
            {{- '\n\n' + content }}
        {%- endif %}
    {%- endif %}
    {{- '<|im_end|>\n' }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {%- set content = render_content(messages[0].content, false, true)|trim %}
        {{- '<|im_start|>system\n' + content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" %}
        {%- set content = render_content(message.content, false)|trim %}
        {%- if not(content.startswith('<tool_response>') and content.endswith('</tool_response>')) %}
            {%- set ns.multi_step_tool = false %}
            {%- set ns.last_query_index = index %}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if ns.multi_step_tool %}
    {{- raise_exception('No user query found in messages.') }}
{%- endif %}
{%- for message in messages %}
    {%- set content = render_content(message.content, true)|trim %}
    {%- if message.role == "system" %}
        {%- if not loop.first %}
            {{- raise_exception('System message must be at the beginning.') }}
        {%- endif %}
    {%- elif message.role == "user" %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- set reasoning_content = reasoning_content|trim %}
        {%- if (preserve_thinking is defined and preserve_thinking is true) or (loop.index0 > ns.last_query_index) %}
            {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content + '\n</think>\n\n' + content }}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {%- if message.tool_calls and message.tool_calls is iterable and message.tool_calls is not mapping %}
            {%- for tool_call in message.tool_calls %}
                {%- if tool_call.function is defined %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {%- if loop.first %}
                    {%- if content|trim %}
                        {{- '\n\n<tool_call>\n<function=' + tool_call.name + '>\n' }}
                    {%- else %}
                        {{- '<tool_call>\n<function=' + tool_call.name + '>\n' }}
                    {%- endif %}
                {%- else %}
                    {{- '\n<tool_call>\n<function=' + tool_call.name + '>\n' }}
                {%- endif %}
                {%- if tool_call.arguments is defined %}
                    {%- for args_name, args_value in tool_call.arguments|items %}
                        {{- '<parameter=' + args_name + '>\n' }}
                        {%- set args_value = args_value | string if args_value is string else args_value | tojson | safe %}
                        {{- args_value }}
                        {{- '\n</parameter>\n' }}
                    {%- endfor %}
                {%- endif %}
                {{- '</function>\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.previtem and loop.previtem.role != "tool" %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- content }}
        {{- '\n</tool_response>' }}
        {%- if not loop.last and loop.nextitem.role != "tool" %}
            {{- '<|im_end|>\n' }}
        {%- elif loop.last %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- else %}
        {{- raise_exception('Unexpected message role.') }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- else %}
        {{- '<think>\n' }}
    {%- endif %}
{%- endif %}`;

/**
 * tokenizer.json and tokenizer_config.json of the stand-in Qwen3.5 / Qwen3.6 tokenizer, by file name, built from
 * Qwen3's tokenizer.json (read from disk in Node by tokenizer-files.ts' qwen3_5TokenizerFiles, fetched in a page).
 */
export function qwen3_5TokenizerFilesFrom(qwen3TokenizerJson: string): Record<string, string> {
  const qwen3 = JSON.parse(qwen3TokenizerJson) as {
    post_processor: unknown;
    model: { vocab: Record<string, number>; merges: (string | [string, string])[] };
  };

  // Qwen3's text tokens keep their ids (0 .. its size - 1); placeholders take the rest of the release's text ids.
  const tokens = new Array<string>(QWEN3_5_TEXT_TOKENS);
  for (const [token, id] of Object.entries(qwen3.model.vocab)) {
    if (id < 0 || id >= QWEN3_5_TEXT_TOKENS || tokens[id] !== undefined) throw new Error(`Qwen3's text token id ${id} does not fit the Qwen3.5 text ids`);
    tokens[id] = token;
  }
  const qwen3Size = Object.keys(qwen3.model.vocab).length;
  for (let id = 0; id < QWEN3_5_TEXT_TOKENS; id++) {
    if (id < qwen3Size && tokens[id] === undefined) throw new Error(`Qwen3's text ids are not contiguous: ${id} is missing`);
    tokens[id] ??= placeholder(id);
  }
  const vocab: Record<string, number> = {};
  tokens.forEach((token, id) => (vocab[token] = id));
  const merges = qwen3.model.merges.map((m) => (typeof m === 'string' ? (m.split(' ') as [string, string]) : m));

  const added = ADDED_TOKENS.map(([content, special], k) => addedToken(QWEN3_5_TEXT_TOKENS + k, content, special));
  const tokenizer = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: { type: 'NFC' },
    pre_tokenizer: QWEN3_5_PRE_TOKENIZER,
    post_processor: qwen3.post_processor,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: bpeModel(vocab, merges, ''),
  };

  const config = {
    add_prefix_space: false,
    added_tokens_decoder: addedTokensDecoder(added),
    audio_bos_token: '<|audio_start|>',
    audio_eos_token: '<|audio_end|>',
    audio_token: '<|audio_pad|>',
    backend: 'tokenizers',
    bos_token: null,
    clean_up_tokenization_spaces: false,
    eos_token: '<|im_end|>',
    errors: 'replace',
    image_token: '<|image_pad|>',
    model_max_length: 262144,
    pad_token: '<|endoftext|>',
    split_special_tokens: false,
    tokenizer_class: 'Qwen2Tokenizer',
    unk_token: null,
    video_token: '<|video_pad|>',
    vision_bos_token: '<|vision_start|>',
    vision_eos_token: '<|vision_end|>',
    chat_template: QWEN3_5_CHAT_TEMPLATE,
  };
  return { 'tokenizer.json': JSON.stringify(tokenizer), 'tokenizer_config.json': JSON.stringify(config, null, 2) };
}
