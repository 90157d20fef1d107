// The server's JSON body parser: bytes decoded as UTF-8 strictly (invalid bytes are a 400, never silently replaced
// by U+FFFD before the model sees them), parsed with fastify's own parser (prototype-poisoning checks), and the
// nesting depth checked before anything that recurses reads it.
import type { FastifyInstance } from 'fastify';
import { ApiError } from './errors.js';
import { checkBodyDepth, type RequestLimits } from './schema-checks.js';

/** A body that is not UTF-8: 400 naming the byte offset. */
export class InvalidUtf8Error extends ApiError {
  constructor(offset: number) {
    super(400, `The body is not valid UTF-8 (first bad byte at offset ${offset})`, 'invalid_request_error', 'body', 'invalid_utf8');
  }
}

const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/** The offset of the first byte that is not part of a valid UTF-8 sequence. */
function firstInvalidByte(bytes: Uint8Array): number {
  // Binary search on the longest prefix that decodes (cut at a sequence start).
  let lo = 0;
  let hi = bytes.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1;
    try {
      new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(0, mid), { stream: true });
      lo = mid;
    } catch {
      hi = mid - 1;
    }
  }
  if (lo < bytes.length) return lo;
  // Every byte fits so far: the text ends inside a sequence, which starts at its lead byte.
  let at = bytes.length - 1;
  while (at > 0 && at > bytes.length - 4 && (bytes[at]! & 0xc0) === 0x80) at--;
  return at;
}

export function decodeUtf8Strict(bytes: Uint8Array): string {
  try {
    return decoder.decode(bytes);
  } catch {
    throw new InvalidUtf8Error(firstInvalidByte(bytes));
  }
}

/** Replaces the app's application/json parser with the strict one. */
export function useStrictJson(app: FastifyInstance, limits: RequestLimits): void {
  const parseText = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    let value: unknown;
    try {
      const text = decodeUtf8Strict(body as Buffer);
      parseText(request, text, (err, parsed) => {
        if (err) throw err;
        value = parsed;
      });
      checkBodyDepth(value, limits);
    } catch (e) {
      return done(e as Error, undefined);
    }
    done(null, value);
  });
}
