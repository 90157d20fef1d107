// openai's compression_ratio through the web platform's CompressionStream (so the browser path needs no node:zlib):
// the same sizes as zlib's deflate at its default level, which is what Python's zlib.compress writes.
import { deflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { compressionRatio } from '../../src/transcribe/decoding.js';

describe('compressionRatio', () => {
  it("equals UTF-8 bytes over zlib's deflate size, repetitive text above openai's 2.4", async () => {
    const texts = ['', ' Hello there.', ' the the the the the the the the the the the the the', ' Grüße, 世界! '.repeat(3), 'x'.repeat(100_000)];
    for (const text of texts) {
      const bytes = new TextEncoder().encode(text);
      expect(await compressionRatio(text)).toBe(bytes.length / deflateSync(bytes).length);
    }
    expect(await compressionRatio(' the the the the the the the the the the the the the')).toBeGreaterThan(2.4);
    expect(await compressionRatio(' Hello there.')).toBeLessThan(2.4);
  });
});
