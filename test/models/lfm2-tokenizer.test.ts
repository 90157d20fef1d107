import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LFM2_PRE_TOKENIZER, LFM2_SPLIT_REGEX, LFM2_VOCAB_SIZE, lfm2TokenizerFiles } from '../../src/models/lfm2/tokenizer.js';
import { expandCaseInsensitiveGroups, withExactCaseInsensitiveRegexes } from '../../src/tokenizer/regex-compat.js';
import { StreamingDecoder, TextTokenizer } from '../../src/tokenizer/tokenizer.js';

const dirs: string[] = [];
function writeDir(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'lfm2-tokenizer-'));
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

describe('(?i:...) groups in tokenizer regexes', () => {
  it('expands the contraction group into case-fold classes and leaves the rest of the pattern as it was', () => {
    const rest = '|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+';
    expect(LFM2_SPLIT_REGEX).toBe(`(?i:'s|'t|'re|'ve|'m|'ll|'d)${rest}`);
    expect(expandCaseInsensitiveGroups(LFM2_SPLIT_REGEX)).toBe(`(?:'[sS\u017F]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])${rest}`);
    expect(expandCaseInsensitiveGroups("(?i:'k\\.x+)|[(?i:a)]|\\(?i:b)")).toBe("(?:'[kK\u212A]\\.[xX]+)|[(?i:a)]|\\(?i:b)");
    expect(expandCaseInsensitiveGroups('(?i:a(?i:b))')).toBe('(?i:a(?:[bB]))');
  });

  it('leaves a group it cannot fold exactly to the library', () => {
    for (const pattern of ['(?i:[a-z]+)', '(?i:\\x41)', '(?i:\\p{Lu})', '(?i:é)', '(?i:ss)', '(?i:a']) {
      expect(expandCaseInsensitiveGroups(pattern)).toBe(pattern);
    }
  });

  it('rewrites Split patterns nested in Sequences and normalizer patterns, without touching the input', () => {
    const split = { type: 'Split', pattern: { Regex: "(?i:'d)" }, behavior: 'Isolated', invert: false };
    const json = {
      normalizer: { type: 'Sequence', normalizers: [{ type: 'Replace', pattern: { Regex: '(?i:m)' }, content: 'm' }] },
      pre_tokenizer: { type: 'Sequence', pretokenizers: [split, { type: 'ByteLevel' }] },
      model: { type: 'BPE' },
    };
    const out = withExactCaseInsensitiveRegexes(json) as typeof json;
    expect(out.pre_tokenizer.pretokenizers[0]).toEqual({ ...split, pattern: { Regex: "(?:'[dD])" } });
    expect(out.normalizer.normalizers[0].pattern.Regex).toBe('(?:[mM])');
    expect(out.model).toBe(json.model);
    expect(split.pattern.Regex).toBe("(?i:'d)");
    const plain = { pre_tokenizer: { type: 'Split', pattern: { Regex: '\\s+' } } };
    expect(withExactCaseInsensitiveRegexes(plain)).toBe(plain);
  });

  // Expected pieces are Oniguruma's (what Hugging Face tokenizers in Rust uses) for LFM2's regex, e.g. `'S` splits off
  // `O'Sullivan` only because the group ignores case, and `'ſ` (U+017F folds to s) splits off `he'ſt`.
  const cases: [string, string[]][] = [
    ["I'LL", ['I', "'LL"]],
    ["don'T", ['don', "'T"]],
    ["He's", ['He', "'s"]],
    ["WE'VE", ['WE', "'VE"]],
    ["O'Sullivan", ['O', "'S", 'ullivan']],
    ["MC'DONALD'S", ['MC', "'D", 'ONALD', "'S"]],
    ["THEY'REady", ['THEY', "'RE", 'ady']],
    ["he'\u017Ft", ['he', "'\u017F", 't']],
    ['12345 x', ['123', '45', ' x']],
  ];

  it('splits case-insensitive contractions off as Hugging Face tokenizers does', () => {
    // A byte-level BPE whose vocabulary holds exactly the expected pieces (ignore_merges: a piece in the vocabulary is
    // one token), so each id decodes to one pre-token and a wrong split shows up as single-byte tokens.
    const vocab: Record<string, number> = {};
    for (const c of BYTE_CHARS) vocab[c] = Object.keys(vocab).length;
    for (const piece of cases.flatMap(([, pieces]) => pieces)) vocab[byteLevel(piece)] ??= Object.keys(vocab).length;
    const json = {
      version: '1.0',
      added_tokens: [],
      normalizer: null,
      pre_tokenizer: LFM2_PRE_TOKENIZER,
      post_processor: null,
      decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
      model: { type: 'BPE', unk_token: null, fuse_unk: false, byte_fallback: false, ignore_merges: true, vocab, merges: [] },
    };
    const tokenizer = TextTokenizer.fromDirectory(writeDir({ 'tokenizer.json': JSON.stringify(json) }));
    for (const [text, pieces] of cases) {
      expect(
        tokenizer.encode(text).map((id) => tokenizer.decode([id])),
        text,
      ).toEqual(pieces);
    }
  });
});

describe('lfm2TokenizerFiles', () => {
  let files: Record<string, string>;
  let json: {
    added_tokens: { id: number; content: string; special: boolean }[];
    model: { vocab: Record<string, number>; merges: [string, string][] };
    pre_tokenizer: unknown;
  };
  let config: Record<string, unknown>;
  let tokenizer: TextTokenizer;

  beforeAll(async () => {
    files = await lfm2TokenizerFiles();
    json = JSON.parse(files['tokenizer.json']);
    config = JSON.parse(files['tokenizer_config.json']);
    tokenizer = TextTokenizer.fromDirectory(writeDir(files));
  });

  it('has exactly 65536 tokens with distinct ids 0..65535, and every merge builds from kept tokens', () => {
    const ids = Object.values(json.model.vocab).sort((a, b) => a - b);
    expect(ids.length).toBe(LFM2_VOCAB_SIZE);
    expect(ids.every((id, k) => id === k)).toBe(true);
    const { vocab } = json.model;
    expect(json.model.merges.filter(([l, r]) => vocab[l] === undefined || vocab[r] === undefined || vocab[l + r] === undefined)).toEqual([]);
    expect(json.model.merges.length).toBeGreaterThan(60000);
    for (const c of BYTE_CHARS) expect(json.model.vocab[c]).toBeGreaterThanOrEqual(501);
  });

  it("puts LFM2's special and added tokens at LFM2's ids", () => {
    const expected: [string, number][] = [
      ['<|pad|>', 0],
      ['<|startoftext|>', 1],
      ['<|endoftext|>', 2],
      ['<|im_start|>', 6],
      ['<|im_end|>', 7],
      ['<|tool_call_start|>', 10],
      ['<|tool_response_end|>', 13],
      ['<|reserved_6|>', 16],
      ['<|reserved_490|>', 500],
      ['<|cot_start|>', 64394],
      ['<|file_end|>', 64399],
    ];
    for (const [content, id] of expected) {
      expect(tokenizer.encode(content), content).toEqual([id]);
      expect(json.added_tokens.find((t) => t.id === id)).toMatchObject({ content, special: true });
    }
    expect(json.added_tokens.length).toBe(507);
    expect(json.added_tokens.filter((t) => !t.special).map((t) => [t.content, t.id])).toEqual([
      ['Mathias', 64011],
      ['python', 64014],
    ]);
    expect(tokenizer.encode('pythonic')[0]).toBe(64014);
    expect(json.model.vocab['<|reserved_4|>']).toBe(14);
    expect(json.added_tokens.some((t) => t.id === 14 || t.id === 15 || t.id >= 64400)).toBe(false);
    expect(JSON.stringify(json.pre_tokenizer)).toContain(JSON.stringify(LFM2_SPLIT_REGEX));
  });

  it('round-trips mixed text through encode and decode', () => {
    const text = "Hello world! I'LL say: don'T panic, 2024-05-17 = 12345678 ÷ 3.\n\tcafé Ωμέγα 日本語 한국어 😀👍🏽 x+=1;";
    const ids = tokenizer.encode(text);
    expect(ids.every((id) => id >= 501 && id < LFM2_VOCAB_SIZE)).toBe(true);
    expect(ids.length).toBeLessThan(new TextEncoder().encode(text).length / 1.5);
    expect(tokenizer.decode(ids)).toBe(text);
    expect(tokenizer.decode([1, ...ids, 7])).toBe(text);
    expect(tokenizer.decode([1, ...ids, 7], false)).toBe(`<|startoftext|>${text}<|im_end|>`);
  });

  it("renders LFM2's chat template from <|startoftext|> to the assistant opening", () => {
    expect(config).toMatchObject({ bos_token: '<|startoftext|>', eos_token: '<|im_end|>', pad_token: '<|pad|>', add_bos_token: true });
    const prompt = tokenizer.applyChatTemplate([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi' },
      { role: 'assistant', content: 'Hello!' },
      { role: 'tool', content: '42' },
      { role: 'user', content: 'Thanks' },
    ]);
    expect(prompt).toBe(
      '<|startoftext|><|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n' +
        '<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>tool\n<|tool_response_start|>42<|tool_response_end|><|im_end|>\n' +
        '<|im_start|>user\nThanks<|im_end|>\n<|im_start|>assistant\n',
    );
    const ids = tokenizer.encode(prompt);
    expect(ids.slice(0, 2)).toEqual([1, 6]);
    expect(ids.filter((id) => id === 7).length).toBe(5);
  });

  it('lists <|im_end|> among the eos ids', () => {
    expect(tokenizer.eosTokenIds).toContain(7);
  });

  it('streams every token although clean_up_tokenization_spaces rewrites the full decode', () => {
    const ids = tokenizer.encode('Hi . there , friend');
    const decoder = new StreamingDecoder(tokenizer);
    const streamed = ids.map((id) => decoder.push(id)).join('');
    expect(streamed).toBe('Hi . there , friend');
    expect(tokenizer.decode(ids)).toBe('Hi. there, friend'); // the config's clean-up, as transformers applies it
  });
});
