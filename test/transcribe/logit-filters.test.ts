// openai/whisper's logit filters (whisper/decoding.py) on constructed logits, each case worked by hand from its rules.
// A toy vocabulary: text 0..9, <|endoftext|> 10, <|notimestamps|> 11, timestamps 12..19 (<|0.00|> .. <|0.14|>).
import { describe, expect, it } from 'vitest';
import { applyTimestampRules, suppressBlank, suppressTokens } from '../../src/transcribe/logit-filters.js';

const T = { eot: 10, noTimestamps: 11, timestampBegin: 12 };
const V = 20;
const flat = (v = 0) => new Float32Array(V).fill(v);
/** Text (and <|endoftext|>) far likelier than any timestamp, so the last rule (timestamps' total) keeps text. */
const textLikely = () => flat().fill(5, 0, 12);
/** Ids still allowed (finite). */
const allowed = (l: Float32Array) => [...l.keys()].filter((i) => l[i] > -Infinity);
const range = (a: number, b: number) => Array.from({ length: b - a }, (_, i) => a + i);
const PROMPT = [50, 51, 52]; // sot sequence: sampleBegin = 3

describe('SuppressBlank and SuppressTokens', () => {
  it('blank and <|endoftext|> only at the first sampled position', () => {
    const first = flat();
    suppressBlank(first, PROMPT, 3, [5, T.eot]);
    expect(allowed(first)).toEqual(range(0, V).filter((i) => i !== 5 && i !== 10));
    const later = flat();
    suppressBlank(later, [...PROMPT, 3], 3, [5, T.eot]);
    expect(allowed(later)).toEqual(range(0, V));
  });

  it('suppressed ids never', () => {
    const l = flat();
    suppressTokens(l, [1, 2, 19]);
    expect(allowed(l)).toEqual(range(0, V).filter((i) => ![1, 2, 19].includes(i)));
  });
});

describe('ApplyTimestampRules', () => {
  it('flat logits: the timestamps together outweigh any one text token, so a timestamp it is', () => {
    const l = flat();
    applyTimestampRules(l, [...PROMPT, 13, 4], 3, T, undefined);
    expect(allowed(l)).toEqual(range(14, 20));
  });

  it('the first sampled token is a timestamp no later than max_initial_timestamp_index', () => {
    const l = flat();
    applyTimestampRules(l, PROMPT, 3, T, 2);
    // text and <|notimestamps|> gone, timestamps 12..14 (index 0..2) left
    expect(allowed(l)).toEqual([12, 13, 14]);
  });

  it('after a timestamp that opens a segment: text or another timestamp later than it, never an equal one', () => {
    // sampled: <|0.02|> (13) then text 4: a segment is open, the last was text
    const l = textLikely();
    applyTimestampRules(l, [...PROMPT, 13, 4], 3, T, undefined);
    // timestamps must be > 13 (nonzero length): 14..19 allowed, text allowed, eot allowed
    expect(allowed(l)).toEqual([...range(0, 11), ...range(14, 20)]);
  });

  it('after text then a timestamp (a closed segment): a timestamp no earlier than it, or <|endoftext|>', () => {
    const l = textLikely();
    applyTimestampRules(l, [...PROMPT, 13, 4, 15], 3, T, undefined);
    // last was a timestamp, penultimate text: no text tokens (< eot); timestamps >= 15 (the pair's partner may be equal)
    expect(allowed(l)).toEqual([10, ...range(15, 20)]);
  });

  it('after a pair of timestamps: text only (no timestamp), <|endoftext|> allowed', () => {
    const l = textLikely();
    applyTimestampRules(l, [...PROMPT, 13, 4, 15, 15], 3, T, undefined);
    expect(allowed(l)).toEqual(range(0, 11));
  });

  it('when the timestamps together outweigh every text token, only timestamps are left', () => {
    // one text token at 1.0; eight timestamps at 0.5 each: logsumexp = 0.5 + ln 8 = 2.58 > 1.0
    const l = flat(-Infinity);
    l[3] = 1;
    for (let i = 12; i < 20; i++) l[i] = 0.5;
    applyTimestampRules(l, [...PROMPT, 13, 4], 3, T, undefined);
    // rule 3 removes 12..13 first: six timestamps left, 0.5 + ln 6 = 2.29 > 1 still
    expect(allowed(l)).toEqual(range(14, 20));
    // and when they do not, text stays
    const m = flat(-Infinity);
    m[3] = 5;
    for (let i = 12; i < 20; i++) m[i] = 0.5;
    applyTimestampRules(m, [...PROMPT, 13, 4], 3, T, undefined);
    expect(allowed(m)).toEqual([3, ...range(14, 20)]);
  });
});
