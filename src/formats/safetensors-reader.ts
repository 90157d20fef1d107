// Lazy safetensors reads: opening a file reads and validates only its header; each tensor is then read with
// positioned reads into two reused chunk buffers and streamed to the device, so host memory stays at two chunks
// whatever the checkpoint's size (no whole-file buffering, no mmap needed). The bytes come from a ByteSource: a
// file on disk, memory, or a URL read by Range requests (byte-source.ts), all validated alike.
import { fileSource, memorySource, readExactly, readInto, type ByteSource } from './byte-source.js';
import type { DeviceName } from '../runtime/backend.js';
import { backendFor, getDefaultDevice } from '../runtime/registry.js';
import { DTYPE_INFO, type DType } from '../core/dtype.js';
import { CheckpointError } from '../core/errors.js';
import { numel } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { cast } from '../ops/convert.js';
import { wrap } from '../ops/util.js';
import { headerLength, parseHeader, type SafetensorsEntry, type SafetensorsHeader } from './safetensors-header.js';
import { cachedUrlSource, type CachedUrlOptions } from './weight-cache.js';

/** Bytes per positioned read and device write. */
export const DEFAULT_CHUNK_BYTES = 8 << 20;
/** Device writes between waits for the queue, bounding the staging memory a driver holds for uploads. */
const SYNC_EVERY_BYTES = 64 << 20;

export interface TensorLoadOptions {
  device?: DeviceName;
  /** Converts on the device after upload (e.g. bf16 file -> float32 tensor). */
  dtype?: DType;
  chunkBytes?: number;
  /** Called after each chunk with its byte count (progress bars). */
  onBytes?: (bytes: number) => void;
}

export class SafetensorsFile implements AsyncDisposable {
  private unsyncedBytes = 0;
  /** Chunk buffers kept across loads: fresh 8 MiB buffers per tensor cost page faults and wait on the GC. */
  private chunkBuffers: Uint8Array[] = [];
  private loading = false;

  private constructor(
    readonly path: string,
    readonly size: number,
    readonly header: SafetensorsHeader,
    private handle: ByteSource | undefined,
  ) {}

  /** Opens `path` (Node) and validates its header; tensor data is read only when asked for. */
  static async open(path: string): Promise<SafetensorsFile> {
    return SafetensorsFile.fromSource(await fileSource(path), path);
  }

  /**
   * A safetensors file at a URL, read with Range requests: the header first, then each tensor in chunks. With
   * `cache`, the file is downloaded whole into the browser's weight cache once its header has been validated over
   * the network, and read from there (its header validated again on the cached bytes, as on every later open).
   */
  static async fromUrl(url: string, options: CachedUrlOptions = {}): Promise<SafetensorsFile> {
    const source = await cachedUrlSource(url, options, async (remote) => void (await SafetensorsFile.fromSource(remote, url)));
    return SafetensorsFile.fromSource(source, url);
  }

  /** A safetensors file in memory; `name` labels errors. */
  static async fromBytes(bytes: Uint8Array, name = 'model.safetensors'): Promise<SafetensorsFile> {
    return SafetensorsFile.fromSource(memorySource(bytes), name);
  }

  /** Validates the header of the file `source` holds (`path` names it in errors); closes the source on failure. */
  static async fromSource(source: ByteSource, path: string): Promise<SafetensorsFile> {
    try {
      const size = source.size;
      const prefix = await readExactly(source, 0, Math.min(8, size), path);
      const n = headerLength(prefix, size, path);
      const header = parseHeader(await readExactly(source, 8, n, path), size, path);
      return new SafetensorsFile(path, size, header, source);
    } catch (e) {
      await source.close();
      throw e;
    }
  }

  get names(): string[] {
    return [...this.header.entries.keys()];
  }

  get metadata(): Readonly<Record<string, string>> {
    return this.header.metadata;
  }

  has(name: string): boolean {
    return this.header.entries.has(name);
  }

  entry(name: string): SafetensorsEntry {
    const e = this.header.entries.get(name);
    if (!e) throw new CheckpointError(`no tensor '${name}' in this file (it has ${this.header.entries.size})`, { file: this.path, tensor: name });
    return e;
  }

  /** The tensor's bytes, [start, start + length) within it, in one buffer (for small tensors and tests). */
  async readBytes(name: string, start = 0, length?: number): Promise<Uint8Array> {
    const e = this.entry(name);
    const size = e.end - e.begin;
    const len = length ?? size - start;
    if (!Number.isSafeInteger(start) || !Number.isSafeInteger(len) || start < 0 || len < 0 || start + len > size) {
      throw new CheckpointError(`byte range [${start}, ${start + len}) is outside the tensor's ${size} bytes`, { file: this.path, tensor: name });
    }
    return readExactly(this.fileHandle(), e.begin + start, len, this.path, name);
  }

  /**
   * Reads a tensor onto a device in chunks: the next chunk's read overlaps the previous chunk's device write.
   * Formats without a tensorgpu dtype (F64, U64, ...) are an error naming the tensor (I64 loads as int64).
   */
  async load(name: string, options: TensorLoadOptions = {}): Promise<Tensor> {
    const e = this.entry(name);
    const where = { file: this.path, tensor: name, offset: e.begin };
    if (!e.dtype) throw new CheckpointError(`dtype ${e.format} cannot be loaded (tensorgpu has no such dtype)`, where);
    // Checked before reading, so a bad target neither reads the tensor nor leaks its storage.
    if (options.dtype !== undefined && !DTYPE_INFO[options.dtype]) throw new CheckpointError(`unknown target dtype '${options.dtype}'`, where);
    const requested = options.chunkBytes ?? DEFAULT_CHUNK_BYTES;
    if (Number.isNaN(requested)) throw new RangeError('chunkBytes is NaN');
    const backend = backendFor(options.device ?? getDefaultDevice());
    const total = e.end - e.begin;
    // Capped at the tensor's size (rounded up to a word): an unbounded chunkBytes means one chunk, not zero chunks.
    const chunk = Math.max(4, Math.floor(Math.min(requested, total + 3) / 4) * 4);
    const fh = this.fileHandle();
    const handle = backend.allocBytes(e.dtype, numel(e.shape));
    // Concurrent loads from one file each get their own buffers; sequential ones share the kept pair.
    const shared = !this.loading;
    const buffers = shared ? this.keptBuffers(Math.min(chunk, total)) : [new Uint8Array(Math.min(chunk, total)), new Uint8Array(Math.min(chunk, total))];
    this.loading ||= shared;
    try {
      const readChunk = (i: number) => {
        const at = i * chunk;
        const len = Math.min(chunk, total - at);
        const read = readInto(fh, buffers[i % 2].subarray(0, len), e.begin + at, this.path, name);
        read.catch(() => {}); // awaited below; this keeps a failure during a device wait from going unhandled
        return read;
      };
      const count = Math.ceil(total / chunk);
      let pending = count > 0 ? readChunk(0) : undefined;
      for (let i = 0; i < count; i++) {
        const bytes = await pending!;
        pending = i + 1 < count ? readChunk(i + 1) : undefined;
        backend.writeBytes(handle, i * chunk, bytes);
        options.onBytes?.(bytes.length);
        this.unsyncedBytes += bytes.length;
        if (this.unsyncedBytes >= SYNC_EVERY_BYTES) {
          this.unsyncedBytes = 0;
          await backend.synchronize();
        }
      }
    } catch (err) {
      backend.free(handle);
      // A read may still be in flight into these buffers: never hand them to the next load.
      if (shared) this.chunkBuffers = [];
      throw err;
    } finally {
      if (shared) this.loading = false;
    }
    const t = wrap(backend, handle, e.dtype, e.shape);
    if (options.dtype === undefined || options.dtype === e.dtype) return t;
    const converted = cast(t, options.dtype);
    t.dispose();
    return converted;
  }

  private keptBuffers(bytes: number): Uint8Array[] {
    if ((this.chunkBuffers[0]?.length ?? 0) < bytes) this.chunkBuffers = [new Uint8Array(bytes), new Uint8Array(bytes)];
    return this.chunkBuffers;
  }

  async close(): Promise<void> {
    this.chunkBuffers = [];
    const fh = this.handle;
    this.handle = undefined;
    await fh?.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  private fileHandle(): ByteSource {
    if (!this.handle) throw new CheckpointError('file is closed', { file: this.path });
    return this.handle;
  }
}
