import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { rename, rm, stat } from 'node:fs/promises';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as NodeReadableStream } from 'node:stream/web';
import { httpError, networkError, type HubClient } from './hub-api.js';
import { HubError } from './hub-errors.js';

// The one part of the download written here rather than taken from @huggingface/hub: its downloadFileToCacheDir
// truncates blobs/<etag>.incomplete on every try (no resume), reports no progress and checks no hash. This does
// what huggingface_hub's http_get does: continue a leftover .incomplete with `Range: bytes=<size>-`, append on
// 206, start over on 200, then check size and hash before the rename that makes the blob visible.

export interface BlobExpectation {
  readonly file: string; // repo-relative path, for messages
  readonly size: number;
  /** LFS files: the sha256 the Hub names them by (their etag). */
  readonly sha256?: string;
  /** Plain git files: the git blob sha1 (their etag). */
  readonly gitSha1?: string;
}

/** Network drops are retried this many times, each continuing where the last stopped. */
const TRANSFER_TRIES = 3;
/** A blob whose bytes do not match is deleted and fetched once more before giving up. */
const VERIFY_TRIES = 2;

async function sizeOf(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch {
    return 0;
  }
}

/** One request: continues `incomplete` from its current size; returns when the body ended (or throws). */
async function transferOnce(client: HubClient, url: string, incomplete: string, want: BlobExpectation, onBytes: (fileBytes: number) => void): Promise<void> {
  let start = await sizeOf(incomplete);
  if (start > want.size) {
    await rm(incomplete, { force: true });
    start = 0;
  }
  if (start === want.size && start > 0) return; // all bytes arrived before an interruption; verify decides
  const headers: Record<string, string> = {};
  if (client.token) headers.Authorization = `Bearer ${client.token}`;
  if (start > 0) headers.Range = `bytes=${start}-`;
  let resp: Response;
  try {
    resp = await client.fetch(url, { headers });
  } catch (e) {
    throw networkError(client, e);
  }
  if (resp.status === 416) {
    // The server refuses the range (the file changed size?): drop the partial file and let the caller retry.
    await resp.body?.cancel();
    await rm(incomplete, { force: true });
    throw new TransferInterrupted(`the Hub refused Range bytes=${start}- for ${want.file}`);
  }
  if (!resp.ok) {
    await resp.body?.cancel();
    throw httpError(client, resp.status, url, { file: want.file, errorCode: resp.headers.get('X-Error-Code') ?? undefined });
  }
  const append = resp.status === 206 && (resp.headers.get('Content-Range') ?? '').startsWith(`bytes ${start}-`);
  let done = append ? start : 0;
  onBytes(done);
  if (!resp.body) throw new TransferInterrupted(`empty body for ${want.file}`);
  const counter = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      done += chunk.length;
      onBytes(done);
      cb(null, chunk);
    },
  });
  try {
    await pipeline(Readable.fromWeb(resp.body as NodeReadableStream), counter, createWriteStream(incomplete, { flags: append ? 'a' : 'w' }));
  } catch (e) {
    throw new TransferInterrupted(`the transfer of ${want.file} broke off after ${done} of ${want.size} bytes (${(e as Error).message})`);
  }
}

class TransferInterrupted extends Error {}

// Hashing reads the finished file once more instead of hashing on the fly: a resumed file's first part was
// written by an earlier process, and the page cache makes the second read cheap next to the download.
async function digestOf(path: string, want: BlobExpectation): Promise<string | undefined> {
  if (!want.sha256 && !want.gitSha1) return undefined;
  const hash = createHash(want.sha256 ? 'sha256' : 'sha1');
  if (!want.sha256) hash.update(`blob ${want.size}\0`); // git's object header: oid = sha1("blob <size>\0" + bytes)
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/**
 * Fetches `url` into `blob` (through `blob`.incomplete), resuming and verifying; returns once `blob` exists with
 * the expected bytes. Throws a HubError when the bytes stay wrong or the transfer keeps breaking off.
 */
export async function fetchBlob(client: HubClient, url: string, blob: string, want: BlobExpectation, onBytes: (fileBytes: number) => void): Promise<void> {
  const incomplete = `${blob}.incomplete`;
  const expectedDigest = want.sha256 ?? want.gitSha1;
  for (let verify = 1; ; verify++) {
    for (let attempt = 1; ; attempt++) {
      try {
        await transferOnce(client, url, incomplete, want, onBytes);
        break;
      } catch (e) {
        if (!(e instanceof TransferInterrupted)) throw e;
        if (attempt >= TRANSFER_TRIES) {
          throw new HubError(`${e.message}; gave up after ${TRANSFER_TRIES} tries. Run again to continue from ${incomplete}`, { repo: client.repo });
        }
      }
    }
    const size = await sizeOf(incomplete);
    const digest = size === want.size ? await digestOf(incomplete, want) : undefined;
    const problem =
      size !== want.size
        ? `has ${size} bytes, expected ${want.size}`
        : digest !== expectedDigest
          ? `has ${want.sha256 ? 'sha256' : 'git sha1'} ${digest}, expected ${expectedDigest}`
          : undefined;
    if (problem === undefined) {
      await rename(incomplete, blob);
      return;
    }
    await rm(incomplete, { force: true });
    if (verify >= VERIFY_TRIES) {
      throw new HubError(`downloaded ${want.file} of ${client.repo} ${problem}, twice; deleted it (from ${url})`, { repo: client.repo });
    }
    onBytes(0);
  }
}
