import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  QWEN3_5_ADDED_TOKENS,
  QWEN3_5_CHAT_TEMPLATE,
  QWEN3_5_EOS_TOKEN_IDS,
  QWEN3_5_PRE_TOKENIZER,
  QWEN3_5_SPLIT_REGEX,
  QWEN3_5_TEXT_TOKENS,
  QWEN3_5_TOKENIZER_SIZE,
  QWEN3_5_VOCAB_SIZE,
} from '../../src/models/qwen3_5/tokenizer.js';
import { qwen3_5TokenizerFiles } from '../../src/models/qwen3_5/tokenizer-files.js';
import { StreamingDecoder, TextTokenizer } from '../../src/tokenizer/tokenizer.js';
import { QWEN3_5_PRESETS } from '../../src/models/qwen3_5/presets.js';

const dirs: string[] = [];
function writeDir(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'qwen3_5-tokenizer-'));
  dirs.push(dir);
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

/** GPT-2's byte -> character table, to write byte-level vocabulary entries by hand. */
const BYTE_CHARS = (() => {
  const printable = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  let shifted = 0;
  return Array.from({ length: 256 }, (_, b) => String.fromCodePoint(printable(b) ? b : 256 + shifted++));
})();
const byteLevel = (text: string) => [...new TextEncoder().encode(text)].map((b) => BYTE_CHARS[b]).join('');

describe("Qwen3.5's pre-tokenizer", () => {
  // Expected pieces follow the release's regex (transformers' Qwen3_5Tokenizer, llama.cpp's QWEN35): combining marks
  // (\p{M}) stay in words and out of punctuation runs, where Qwen3's regex splits them off; digits go one by one.
  const cases: [string, string[]][] = [
    ['\u0301!I', ['\u0301', '!I']], // Qwen3: ['\u0301!', 'I']
    ['नमस्ते दुनिया', ['नमस्ते', ' दुनिया']], // Qwen3: 'नमस', '्', 'त', 'े', ...
    ["I'LL don'T", ['I', "'LL", ' don', "'T"]],
    ['12345 x', ['1', '2', '3', '4', '5', ' x']],
    ['a\n\n  b', ['a', '\n\n', ' ', ' b']],
  ];

  it('splits text into the release regex pieces', () => {
    // A byte-level BPE whose vocabulary holds exactly the expected pieces (ignore_merges: a piece in the vocabulary is
    // one token), so each id decodes to one pre-token and a wrong split shows up as single-byte tokens.
    const vocab: Record<string, number> = {};
    for (const c of BYTE_CHARS) vocab[c] = Object.keys(vocab).length;
    for (const piece of cases.flatMap(([, pieces]) => pieces)) vocab[byteLevel(piece)] ??= Object.keys(vocab).length;
    const json = {
      version: '1.0',
      added_tokens: [],
      normalizer: { type: 'NFC' },
      pre_tokenizer: QWEN3_5_PRE_TOKENIZER,
      post_processor: null,
      decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
      model: { type: 'BPE', unk_token: null, fuse_unk: false, byte_fallback: false, ignore_merges: true, vocab, merges: [] },
    };
    const tokenizer = TextTokenizer.fromDirectory(writeDir({ 'tokenizer.json': JSON.stringify(json) }));
    for (const [text, pieces] of cases) {
      expect(
        tokenizer.encode(text).map((id) => tokenizer.decode([id])),
        JSON.stringify(text),
      ).toEqual(pieces);
    }
    expect(QWEN3_5_SPLIT_REGEX).toBe(
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    );
  });
});

describe('qwen3_5TokenizerFiles', () => {
  let json: {
    added_tokens: { id: number; content: string; special: boolean; normalized: boolean }[];
    normalizer: unknown;
    pre_tokenizer: unknown;
    model: { vocab: Record<string, number>; merges: [string, string][] };
  };
  let config: Record<string, unknown>;
  let tokenizer: TextTokenizer;

  beforeAll(async () => {
    const files = await qwen3_5TokenizerFiles();
    json = JSON.parse(files['tokenizer.json']);
    config = JSON.parse(files['tokenizer_config.json']);
    tokenizer = TextTokenizer.fromDirectory(writeDir(files));
  });

  it("has the release's shape: 248,044 text ids, 33 added tokens after them, nothing from 248,077 to 248,319", () => {
    const ids = Object.values(json.model.vocab).sort((a, b) => a - b);
    expect(ids.length).toBe(QWEN3_5_TEXT_TOKENS);
    expect(ids.every((id, k) => id === k)).toBe(true);
    expect(json.added_tokens.map((t) => t.id)).toEqual(Array.from({ length: 33 }, (_, k) => 248044 + k));
    expect(QWEN3_5_TEXT_TOKENS + json.added_tokens.length).toBe(QWEN3_5_TOKENIZER_SIZE);
    expect(QWEN3_5_VOCAB_SIZE).toBe(248320);
    // Qwen3's text tokens keep their ids; every merge builds from kept tokens; placeholders fill the rest.
    const { vocab } = json.model;
    expect([vocab['!'], vocab.Ġ, vocab.ĠĠ, vocab['<|placeholder_151643|>'], vocab['<|placeholder_248043|>']]).toEqual([0, 220, 256, 151643, 248043]);
    expect(json.model.merges.length).toBe(151387);
    expect(json.model.merges.filter(([l, r]) => vocab[l] === undefined || vocab[r] === undefined || vocab[l + r] === undefined)).toEqual([]);
    expect(json.normalizer).toEqual({ type: 'NFC' });
    expect(JSON.stringify(json.pre_tokenizer)).toContain(JSON.stringify(QWEN3_5_SPLIT_REGEX));
  });

  it("puts the release's added tokens at its ids, with its special flags", () => {
    const expected: [string, number][] = [
      ['<|endoftext|>', 248044],
      ['<|im_start|>', 248045],
      ['<|im_end|>', 248046],
      ['<|vision_start|>', 248053],
      ['<|vision_end|>', 248054],
      ['<|vision_pad|>', 248055],
      ['<|image_pad|>', 248056],
      ['<|video_pad|>', 248057],
      ['<tool_call>', 248058],
      ['</tool_call>', 248059],
      ['<|fim_prefix|>', 248060],
      ['<|file_sep|>', 248065],
      ['<tool_response>', 248066],
      ['</tool_response>', 248067],
      ['<think>', 248068],
      ['</think>', 248069],
      ['<|audio_start|>', 248070],
      ['<tts_text_bos_single>', 248075],
      ['<|audio_pad|>', 248076],
    ];
    for (const [content, id] of expected) {
      expect(tokenizer.encode(content), content).toEqual([id]);
      expect(QWEN3_5_ADDED_TOKENS[id]).toBe(content);
      expect(json.added_tokens.find((t) => t.id === id)?.content).toBe(content);
    }
    // 21 special (control) tokens; the tool-call, FIM / repo and think tokens are added but not special, as in Qwen3.
    const plain = json.added_tokens.filter((t) => !t.special).map((t) => t.id);
    expect(plain).toEqual([248058, 248059, 248060, 248061, 248062, 248063, 248064, 248065, 248066, 248067, 248068, 248069]);
    expect(json.added_tokens.every((t) => !t.normalized)).toBe(true);
    expect(tokenizer.encode('a<think>b</think>c')).toEqual([...tokenizer.encode('a'), 248068, ...tokenizer.encode('b'), 248069, ...tokenizer.encode('c')]);
    // Skipping special tokens drops <|im_end|> but keeps the think tags (not special), as transformers does.
    expect(tokenizer.decode([248068, ...tokenizer.encode('hm'), 248069, 248046])).toBe('<think>hm</think>');
  });

  it('round-trips mixed text through encode and decode', () => {
    const text = " Hello world! I'LL say: don'T panic, 2024-05-17 = 12345678 ÷ 3.\n\tcafé Ωμέγα 日本語 한국어 नमस्ते 😀👍🏽 x+=1;";
    const ids = tokenizer.encode(text);
    expect(ids.every((id) => id >= 0 && id < 151643)).toBe(true); // Qwen3's text tokens, never a placeholder
    expect(ids.length).toBeLessThan(new TextEncoder().encode(text).length / 1.5);
    expect(tokenizer.decode(ids)).toBe(text);
    expect(tokenizer.decode([248045, ...ids, 248046])).toBe(text);
    expect(tokenizer.decode([248045, ...ids, 248046], false)).toBe(`<|im_start|>${text}<|im_end|>`);
    const decoder = new StreamingDecoder(tokenizer);
    expect(ids.map((id) => decoder.push(id)).join('')).toBe(text);
    // Ids past the tokenizer (the embedding's padding rows) decode to nothing, as in the release.
    expect(tokenizer.decode([...tokenizer.encode('a'), 248100, 248319, ...tokenizer.encode('b')])).toBe('ab');
  });

  it("carries the release's tokenizer_config.json fields; eos is <|im_end|> and the presets stop on the release's eos ids", () => {
    expect(config).toMatchObject({
      bos_token: null,
      eos_token: '<|im_end|>',
      pad_token: '<|endoftext|>',
      unk_token: null,
      clean_up_tokenization_spaces: false,
      add_prefix_space: false,
      split_special_tokens: false,
      errors: 'replace',
      model_max_length: 262144,
      tokenizer_class: 'Qwen2Tokenizer',
      image_token: '<|image_pad|>',
      video_token: '<|video_pad|>',
    });
    const decoder = config.added_tokens_decoder as Record<string, { content: string; special: boolean }>;
    expect(Object.keys(decoder).map(Number)).toEqual(json.added_tokens.map((t) => t.id));
    expect(decoder['248068']).toMatchObject({ content: '<think>', special: false });
    expect(tokenizer.eosTokenIds).toEqual([248046]);
    expect(QWEN3_5_EOS_TOKEN_IDS).toEqual([248046, 248044]);
    for (const [name, preset] of Object.entries(QWEN3_5_PRESETS)) {
      expect([preset.vocabSize, preset.eosTokenIds], name).toEqual([QWEN3_5_VOCAB_SIZE, QWEN3_5_EOS_TOKEN_IDS]);
    }
  });
});

describe("Qwen3.6's chat template", () => {
  let tokenizer: TextTokenizer;
  beforeAll(async () => {
    tokenizer = TextTokenizer.fromDirectory(writeDir(await qwen3_5TokenizerFiles()));
  });

  it("is the release's chat_template.jinja byte for byte", () => {
    expect(createHash('sha256').update(QWEN3_5_CHAT_TEMPLATE).digest('hex')).toBe('e84f32a23fdda27689f868aa4a1a5621f41133e51a48d7f3efcbea2839574259');
    expect(Buffer.byteLength(QWEN3_5_CHAT_TEMPLATE)).toBe(7764);
  });

  const conversation = [
    { role: 'system' as const, content: '  Be brief.\n' },
    { role: 'user' as const, content: 'Hi' },
    { role: 'assistant' as const, content: '<think>\nweighing it\n</think>\n\nHello!' },
    { role: 'user' as const, content: 'Thanks' },
  ];
  // The system text is trimmed; an assistant turn before the last user query loses its reasoning.
  const history =
    '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n' +
    '<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nThanks<|im_end|>\n';

  it('opens the assistant turn with an empty think block when thinking is off (the default here)', () => {
    const prompt = tokenizer.applyChatTemplate(conversation);
    expect(prompt).toBe(`${history}<|im_start|>assistant\n<think>\n\n</think>\n\n`);
    expect(tokenizer.applyChatTemplate(conversation, { enableThinking: false })).toBe(prompt);
    const ids = tokenizer.encode(prompt);
    expect(ids.slice(0, 1)).toEqual([248045]);
    expect(ids.filter((id) => id === 248046).length).toBe(4);
    const blank = tokenizer.encode('\n\n'); // one token
    expect(ids.slice(-2 - 2 * blank.length)).toEqual([248068, ...blank, 248069, ...blank]);
  });

  it('reads the template from chat_template.jinja, as the release ships it (winning over tokenizer_config.json)', async () => {
    const files = await qwen3_5TokenizerFiles();
    const bare = JSON.parse(files['tokenizer_config.json']);
    bare.chat_template = '{{ "from the config" }}';
    const fromJinja = TextTokenizer.fromDirectory(
      writeDir({ 'tokenizer.json': files['tokenizer.json'], 'tokenizer_config.json': JSON.stringify(bare), 'chat_template.jinja': QWEN3_5_CHAT_TEMPLATE }),
    );
    expect(fromJinja.applyChatTemplate(conversation, { enableThinking: true })).toBe(`${history}<|im_start|>assistant\n<think>\n`);
    const configOnly = TextTokenizer.fromDirectory(writeDir({ 'tokenizer.json': files['tokenizer.json'], 'tokenizer_config.json': JSON.stringify(bare) }));
    expect(configOnly.applyChatTemplate(conversation)).toBe('from the config');
  });

  it('opens the assistant turn with <think> when thinking is on (where Qwen3 adds nothing)', () => {
    const prompt = tokenizer.applyChatTemplate(conversation, { enableThinking: true });
    expect(prompt).toBe(`${history}<|im_start|>assistant\n<think>\n`);
    expect(tokenizer.encode(prompt).slice(-2)).toEqual([248068, ...tokenizer.encode('\n')]);
  });

  it('keeps the reasoning of turns after the last user query and wraps tool results in a user turn', () => {
    const prompt = tokenizer.applyChatTemplate(
      [
        { role: 'user', content: 'What is 6 x 7?' },
        { role: 'assistant', content: '<think>\nuse the tool\n</think>\n\nChecking.' },
        { role: 'tool', content: '42' },
        { role: 'tool', content: 'done' },
      ],
      { enableThinking: true },
    );
    expect(prompt).toBe(
      '<|im_start|>user\nWhat is 6 x 7?<|im_end|>\n' +
        '<|im_start|>assistant\n<think>\nuse the tool\n</think>\n\nChecking.<|im_end|>\n' +
        '<|im_start|>user\n<tool_response>\n42\n</tool_response>\n<tool_response>\ndone\n</tool_response><|im_end|>\n' +
        '<|im_start|>assistant\n<think>\n',
    );
  });
});
