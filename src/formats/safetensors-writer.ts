// Writes safetensors files tensor by tensor: the header is computed from shapes and dtypes first, then each tensor's
// bytes are produced and written in turn, so a checkpoint larger than memory can be generated.
// The file variant writes through the Node host, so browser bundles can encode in memory with no file system.
import type { DType } from '../core/dtype.js';
import { CheckpointError } from '../core/errors.js';
import { nodeHost } from '../runtime/host.js';
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
 * The 8-byte length prefix and the JSON header of `tensors` (in the order given). The header is padded with spaces
 * to a multiple of 8 bytes, as the reference implementation does, so data offsets stay 8-byte aligned in the file.
 */
function encodeHeader(
  list: readonly (readonly [string, TensorSource])[],
  file: string,
  metadata?: Record<string, string>,
): { prefix: Uint8Array; json: Uint8Array; dataBytes: number } {
  // No prototype: on a plain object, header['__proto__'] = ... would set the prototype and drop the tensor.
  const header = Object.create(null) as Record<string, unknown>;
  if (metadata && Object.keys(metadata).length > 0) header.__metadata__ = metadata;
  let at = 0;
  for (const [name, source] of list) {
    if (name === '__metadata__' || Object.hasOwn(header, name))
      throw new CheckpointError(`tensor name '${name}' is reserved or given twice`, { file, tensor: name });
    const size = sourceBytes(source);
    header[name] = { dtype: formatOf(source.dtype).name, shape: [...source.shape], data_offsets: [at, at + size] };
    at += size;
  }
  const text = new TextEncoder().encode(JSON.stringify(header));
  const json = new Uint8Array(Math.ceil(text.length / 8) * 8).fill(0x20);
  json.set(text);
  const prefix = new Uint8Array(8);
  new DataView(prefix.buffer).setBigUint64(0, BigInt(json.length), true);
  return { prefix, json, dataBytes: at };
}

async function checkedBytes(name: string, source: TensorSource, file: string): Promise<Uint8Array> {
  const bytes = await source.bytes();
  if (bytes.length !== sourceBytes(source)) {
    throw new CheckpointError(`source gave ${bytes.length} bytes, its shape [${source.shape.join(', ')}] of ${source.dtype} needs ${sourceBytes(source)}`, {
      file,
      tensor: name,
    });
  }
  return bytes;
}

/** Writes `tensors` (in the order given) to `path`, one tensor's bytes in memory at a time. */
export async function writeSafetensors(path: string, tensors: Iterable<readonly [string, TensorSource]>, metadata?: Record<string, string>): Promise<void> {
  const list = [...tensors];
  const { prefix, json } = encodeHeader(list, path, metadata);
  const fh = await nodeHost('writeSafetensors').createFile(path);
  try {
    await fh.write(prefix);
    await fh.write(json);
    for (const [name, source] of list) await fh.write(await checkedBytes(name, source, path));
  } finally {
    await fh.close();
  }
}

/** The whole safetensors file of `tensors` in memory (a generated checkpoint in a page, a download). */
export async function encodeSafetensors(
  tensors: Iterable<readonly [string, TensorSource]>,
  metadata?: Record<string, string>,
  name = 'model.safetensors',
): Promise<Uint8Array> {
  const list = [...tensors];
  const { prefix, json, dataBytes } = encodeHeader(list, name, metadata);
  const out = new Uint8Array(8 + json.length + dataBytes);
  out.set(prefix);
  out.set(json, 8);
  let at = 8 + json.length;
  for (const [tensor, source] of list) {
    const bytes = await checkedBytes(tensor, source, name);
    out.set(bytes, at);
    at += bytes.length;
  }
  return out;
}
