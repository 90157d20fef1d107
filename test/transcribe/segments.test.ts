// openai/whisper's window-to-segments and seek rules (whisper/transcribe.py) on constructed token lists, worked by
// hand: timestamp pairs cut segments, a single timestamp at the end means the window was transcribed to its end, and
// otherwise seek moves to the last timestamp (2 mel frames per 0.02 s step). And the subtitle formats.
import { describe, expect, it } from 'vitest';
import { formatTimestamp, toSrt, toText, toVtt, windowSegments } from '../../src/transcribe/segments.js';

const TB = 100; // <|0.00|>
const ts = (seconds: number) => TB + Math.round(seconds / 0.02);
const G = { timestampBegin: TB, timeOffset: 30, segmentSize: 3000, segmentDuration: 30, inputStride: 2, timePrecision: 0.02 };

describe('windowSegments', () => {
  it('pairs cut segments; ending in a pair seeks to the last timestamp', () => {
    // <|0.00|> a b <|1.00|><|1.00|> c <|2.50|><|2.50|> d (cut: no closing timestamp)
    const tokens = [ts(0), 1, 2, ts(1), ts(1), 3, ts(2.5), ts(2.5), 4];
    const { segments, seekAdvance } = windowSegments(tokens, G);
    expect(segments.map((s) => [s.start, s.end, s.tokens])).toEqual([
      [30, 31, [ts(0), 1, 2, ts(1)]],
      [31, 32.5, [ts(1), 3, ts(2.5)]],
    ]);
    // last_slice = 7, tokens[6] = <|2.50|>: 125 steps x 2 frames
    expect(seekAdvance).toBe(250);
  });

  it('a single timestamp at the end: the last segment runs to it and seek moves a whole window', () => {
    const tokens = [ts(0), 1, ts(1), ts(1.2), 2, ts(3)];
    const { segments, seekAdvance } = windowSegments(tokens, { ...G, segmentSize: 1700, segmentDuration: 17 });
    expect(segments.map((s) => [s.start, s.end])).toEqual([
      [30, 31],
      [31.2, 33],
    ]);
    expect(seekAdvance).toBe(1700);
  });

  it('no pair: one segment, to the last timestamp when there is one (not <|0.00|>), else the whole window', () => {
    const one = windowSegments([ts(0), 1, 2, ts(4)], { ...G, segmentSize: 900, segmentDuration: 9 });
    expect(one.segments).toEqual([{ start: 30, end: 34, tokens: [ts(0), 1, 2, ts(4)] }]);
    expect(one.seekAdvance).toBe(900);
    const none = windowSegments([1, 2], { ...G, segmentSize: 900, segmentDuration: 9 });
    expect(none.segments.map((s) => [s.start, s.end])).toEqual([[30, 39]]);
    const zero = windowSegments([ts(0), 1], { ...G, segmentSize: 900, segmentDuration: 9 });
    expect(zero.segments.map((s) => [s.start, s.end])).toEqual([[30, 39]]);
  });
});

describe('subtitle formats', () => {
  const segs = [
    { start: 0, end: 2.5, text: ' Hello there.' },
    { start: 3725.0004, end: 3726.4, text: ' a --> b' },
  ];
  it('timestamps as openai formats them', () => {
    expect(formatTimestamp(0)).toBe('00:00.000');
    expect(formatTimestamp(3725.0004, true, ',')).toBe('01:02:05,000');
    expect(formatTimestamp(61.0625)).toBe('01:01.063');
  });
  it('text, SRT and VTT', () => {
    expect(toText(segs)).toBe('Hello there.\na --> b\n');
    expect(toSrt(segs)).toBe('1\n00:00:00,000 --> 00:00:02,500\nHello there.\n\n2\n01:02:05,000 --> 01:02:06,400\na -> b\n\n');
    expect(toVtt(segs)).toBe('WEBVTT\n\n00:00.000 --> 00:02.500\nHello there.\n\n01:02:05.000 --> 01:02:06.400\na -> b\n\n');
  });
});
