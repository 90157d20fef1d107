// Where a safetensors file's bytes come from: a file on disk (Node), bytes in memory, or a URL read with HTTP Range
// requests (browsers, or Node's fetch). The reader asks for byte ranges only, so a header is validated before any
// tensor is read and a tensor streams to the device chunk by chunk whatever the source.
import { CheckpointError } from '../core/errors.js';
import { nodeHost, type HostFile } from '../runtime/host.js';

export interface ByteSource {
  /** Total size in bytes. */
  readonly size: number;
  /** Reads into `into` from `position`; resolves with the bytes read (0 only at the end of the data). */
  read(into: Uint8Array, position: number): Promise<number>;
  close(): Promise<void>;
}

/** Fills `into` from `position`, or fails naming the file, tensor and offset where the data ran out. */
export async function readInto(source: ByteSource, into: Uint8Array, position: number, file: string, tensor?: string): Promise<Uint8Array> {
  let done = 0;
  while (done < into.length) {
    let bytesRead: number;
    try {
      bytesRead = await source.read(into.subarray(done), position + done);
    } catch (e) {
      // EISDIR, EIO, a handle closed mid-load, a failed request: still a problem with this file, so still located.
      if (e instanceof CheckpointError) throw e;
      throw new CheckpointError(`cannot read: ${(e as Error).message}`, { file, tensor, offset: position + done });
    }
    if (bytesRead === 0) {
      // The file shrank after its header was validated.
      throw new CheckpointError(`file ended at byte ${position + done}, ${into.length - done} bytes short of the data`, {
        file,
        tensor,
        offset: position + done,
      });
    }
    done += bytesRead;
  }
  return into;
}

export function readExactly(source: ByteSource, position: number, length: number, file: string, tensor?: string): Promise<Uint8Array> {
  return readInto(source, new Uint8Array(length), position, file, tensor);
}

/** Bytes already in memory (a fetched file, a `File` the user picked and read, a generated checkpoint). */
export function memorySource(bytes: Uint8Array): ByteSource {
  return {
    size: bytes.length,
    read: async (into, position) => {
      const n = Math.max(0, Math.min(into.length, bytes.length - position));
      into.set(bytes.subarray(position, position + n));
      return n;
    },
    close: async () => {},
  };
}

/** A `Blob` / `File` (a file the user picked in a page): read by slices, never whole. */
export function blobSource(blob: Blob): ByteSource {
  return {
    size: blob.size,
    read: async (into, position) => {
      const part = new Uint8Array(await blob.slice(position, position + into.length).arrayBuffer());
      into.set(part);
      return part.length;
    },
    close: async () => {},
  };
}

export interface UrlSourceOptions {
  /** Defaults to the global fetch. */
  fetch?: typeof fetch;
  /** Extra request headers (e.g. Authorization). */
  headers?: Record<string, string>;
}

/** The total size a Range response's Content-Range gives (`bytes a-b/total`), or undefined without one. */
export function contentRangeTotal(res: Response): number | undefined {
  const total = /\/(\d+)\s*$/.exec(res.headers.get('content-range') ?? '')?.[1];
  return total === undefined ? undefined : Number(total);
}

/**
 * One HTTP Range request for bytes start..end: the 206 response (or 416, past the end of the file); any other
 * answer, or a failed fetch, is a CheckpointError naming the URL and the offset.
 */
export async function rangeRequest(url: string, start: number, end: number, options: UrlSourceOptions = {}): Promise<Response> {
  let res: Response;
  try {
    res = await (options.fetch ?? fetch)(url, { headers: { ...options.headers, Range: `bytes=${start}-${end}` } });
  } catch (e) {
    throw new CheckpointError(`cannot fetch: ${(e as Error).message}`, { file: url, offset: start });
  }
  if (res.status === 416) return res;
  if (res.status !== 206) {
    await res.body?.cancel();
    throw new CheckpointError(`HTTP ${res.status} for a byte range request${res.status === 200 ? ' (the server ignores Range requests)' : ''}`, {
      file: url,
      offset: start,
    });
  }
  return res;
}

/**
 * A URL read with HTTP Range requests. The size comes from the first request's Content-Range; a server that
 * ignores Range (answers 200 with the whole body) is refused, since every tensor read would download the file.
 */
export async function urlSource(url: string, options: UrlSourceOptions = {}): Promise<ByteSource> {
  const range = (start: number, end: number) => rangeRequest(url, start, end, options);
  const first = await range(0, 7);
  const size = contentRangeTotal(first);
  await first.body?.cancel();
  if (first.status === 416) return { size: 0, read: async () => 0, close: async () => {} };
  if (size === undefined) throw new CheckpointError('the server gave no Content-Range total for a byte range request', { file: url });
  return {
    size,
    read: async (into, position) => {
      if (position >= size || into.length === 0) return 0;
      const end = Math.min(size, position + into.length) - 1;
      const res = await range(position, end);
      const bytes = new Uint8Array(await res.arrayBuffer());
      const n = Math.min(bytes.length, into.length);
      into.set(bytes.subarray(0, n));
      return n;
    },
    close: async () => {},
  };
}

/** A file on disk (Node only: through the Node host, so browser bundles reach no file system; NodeOnlyError there). */
export async function fileSource(path: string): Promise<ByteSource> {
  const host = nodeHost('fileSource');
  let fh: HostFile;
  try {
    fh = await host.openFile(path);
  } catch (e) {
    throw new CheckpointError(`cannot open: ${(e as Error).message}`, { file: path });
  }
  try {
    const size = await fh.size();
    return {
      size,
      read: (into, position) => fh.read(into, position),
      close: () => fh.close(),
    };
  } catch (e) {
    await fh.close();
    throw new CheckpointError(`cannot read: ${(e as Error).message}`, { file: path });
  }
}
