// Writes safetensors files tensor by tensor: the header is computed from shapes and dtypes first, then each tensor's
// bytes are produced and written in turn, so a checkpoint larger than memory can be generated.
import { open, type FileHandle } from 'node:fs/promises';
import type { DType } from '../core/dtype.js';
import { CheckpointError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import { toBytes } from '../ops/convert.js';
import { SAFETENSORS_DTYPES, safetensorsDTypeName } from './safetensors-header.js';

/** One tensor to write: its format and shape up front, its bytes produced only when written. */
export interface TensorSource {
  /** A tensorgpu dtype or a safetensors dtype name (F8_E4M3, BF16, F64, ...). */
  readonly dtype: DType | string;
  readonly shape: readonly number[];
  readonly bytes: () => Uint8Array | Promise<Uint8Array>;
}

/** A source reading a tensor's storage bytes when written. */
export function tensorSource(t: Tensor): TensorSource {
  return { dtype: t.dtype, shape: t.shape, bytes: () => toBytes(t) };
}

function formatOf(dtype: string): { name: string; bytes: number } {
  const name = Object.hasOwn(SAFETENSORS_DTYPES, dtype) ? dtype : safetensorsDTypeName(dtype as DType);
  return { name, bytes: SAFETENSORS_DTYPES[name].bytes };
}

/** The byte size of a source's data. */
export function sourceBytes(source: TensorSource): number {
  return source.shape.reduce((a, d) => a * d, formatOf(source.dtype).bytes);
}

/**
 * Writes `tensors` (in the order given) to `path`. The header is padded with spaces to a multiple of 8 bytes, as
 * the reference implementation does, so data offsets stay 8-byte aligned in the file.
 */
export async function writeSafetensors(path: string, tensors: Iterable<readonly [string, TensorSource]>, metadata?: Record<string, string>): Promise<void> {
  const list = [...tensors];
  // No prototype: on a plain object, header['__proto__'] = ... would set the prototype and drop the tensor.
  const header = Object.create(null) as Record<string, unknown>;
  if (metadata && Object.keys(metadata).length > 0) header.__metadata__ = metadata;
  let at = 0;
  for (const [name, source] of list) {
    if (name === '__metadata__' || Object.hasOwn(header, name)) throw new CheckpointError(`tensor name '${name}' is reserved or given twice`, { file: path, tensor: name });
    const size = sourceBytes(source);
    header[name] = { dtype: formatOf(source.dtype).name, shape: [...source.shape], data_offsets: [at, at + size] };
    at += size;
  }
  let json = Buffer.from(JSON.stringify(header), 'utf8');
  const padded = Math.ceil(json.length / 8) * 8;
  if (padded > json.length) json = Buffer.concat([json, Buffer.alloc(padded - json.length, 0x20)]);
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(json.length));

  const fh = await open(path, 'w');
  try {
    await writeAll(fh, prefix);
    await writeAll(fh, json);
    for (const [name, source] of list) {
      const bytes = await source.bytes();
      if (bytes.length !== sourceBytes(source)) {
        throw new CheckpointError(`source gave ${bytes.length} bytes, its shape [${source.shape.join(', ')}] of ${source.dtype} needs ${sourceBytes(source)}`, { file: path, tensor: name });
      }
      await writeAll(fh, bytes);
    }
  } finally {
    await fh.close();
  }
}

async function writeAll(fh: FileHandle, bytes: Uint8Array): Promise<void> {
  for (let done = 0; done < bytes.length; ) done += (await fh.write(bytes, done, bytes.length - done)).bytesWritten;
}
