// A whole file downloaded as a run of HTTP Range requests (what the weight cache stores): bounded requests that a
// CDN serves and a progress bar can follow, each body handed on as it streams in, never held whole. Every response
// must agree with the first on the file's size and ETag, so a file replaced during the download fails instead of
// being stored as a mix of two versions.
import { CheckpointError } from '../core/errors.js';
import { contentRangeTotal, rangeRequest, type UrlSourceOptions } from './byte-source.js';
import type { StoredFacts, WritePart } from './weight-cache-store.js';

/** Bytes per Range request. */
export const DOWNLOAD_CHUNK_BYTES = 16 << 20;

export interface RangeDownloadOptions extends UrlSourceOptions {
  chunkBytes?: number;
  /** Called as bytes arrive: done of total. */
  onProgress?: (done: number, total: number) => void;
}

/** Downloads url's `size` bytes into `write`; resolves with the size and the validators the server gave. */
export async function downloadByRanges(url: string, size: number, write: WritePart, options: RangeDownloadOptions = {}): Promise<StoredFacts> {
  const chunk = Math.max(1, Math.floor(options.chunkBytes ?? DOWNLOAD_CHUNK_BYTES));
  let first: StoredFacts | undefined;
  let done = 0;
  options.onProgress?.(0, size);
  for (let start = 0; start < size; start += chunk) {
    const end = Math.min(size, start + chunk) - 1;
    const res = await rangeRequest(url, start, end, options);
    const facts: StoredFacts = {
      size: contentRangeTotal(res) ?? NaN,
      etag: res.headers.get('etag') ?? undefined,
      lastModified: res.headers.get('last-modified') ?? undefined,
    };
    const changed = res.status === 206 && first !== undefined && (facts.etag ?? first.etag) !== (first.etag ?? facts.etag);
    if (res.status !== 206 || facts.size !== size || changed) {
      await res.body?.cancel();
      // rangeRequest refused every status but 206 and 416 (past the end: the file shrank).
      const problem =
        res.status !== 206
          ? `HTTP ${res.status} for a byte range request`
          : `the file changed during the download (${changed ? `ETag ${first!.etag}, then ${facts.etag}` : `${size} bytes, then ${facts.size}`})`;
      throw new CheckpointError(problem, { file: url, offset: start });
    }
    first ??= facts;
    done += await streamBody(res, end - start + 1, write, url, start, (n) => options.onProgress?.(done + n, size));
  }
  return { size, etag: first?.etag, lastModified: first?.lastModified };
}

/** Hands a range response's body to `write` piece by piece; fails unless it holds exactly `expected` bytes. */
async function streamBody(res: Response, expected: number, write: WritePart, url: string, offset: number, progress: (bytes: number) => void): Promise<number> {
  if (!res.body) throw new CheckpointError(`empty response to a ${expected}-byte range request`, { file: url, offset });
  const reader = res.body.getReader();
  let got = 0;
  try {
    for (;;) {
      let piece: Awaited<ReturnType<typeof reader.read>>;
      try {
        piece = await reader.read();
      } catch (e) {
        throw new CheckpointError(`download interrupted: ${(e as Error).message}`, { file: url, offset: offset + got });
      }
      if (piece.done) break;
      got += piece.value.length;
      if (got > expected) throw new CheckpointError(`the server sent more than the ${expected} bytes asked for`, { file: url, offset });
      // A failure here is the store's (a full disk, a quota), not the file's: it is passed on as it is.
      await write(piece.value);
      progress(got);
    }
  } catch (e) {
    await reader.cancel().catch(() => {});
    throw e;
  }
  if (got !== expected) throw new CheckpointError(`the download ended after ${got} of ${expected} bytes`, { file: url, offset: offset + got });
  return got;
}
