// The safetensors header: an 8-byte little-endian length, then that many bytes of UTF-8 JSON mapping tensor names
// to {dtype, shape, data_offsets}, then the data. Nothing in it is trusted: every field is checked against the file
// size before a byte of tensor data is read (the same rules as the reference Rust crate, plus duplicate keys,
// which JSON.parse would silently merge).
import type { DType } from '../core/dtype.js';
import { CheckpointError } from '../core/errors.js';
import { firstDuplicateKey } from './json-keys.js';

/** Largest header accepted (the Rust crate's limit): a bigger claim is a corrupt or hostile file. */
export const MAX_HEADER_BYTES = 100_000_000;

/** Safetensors dtype names with their element size and the tensorgpu dtype they load as (if any). */
export const SAFETENSORS_DTYPES: Readonly<Record<string, { readonly bytes: number; readonly dtype?: DType }>> = {
  BOOL: { bytes: 1, dtype: 'bool' },
  U8: { bytes: 1, dtype: 'uint8' },
  I8: { bytes: 1 },
  F8_E4M3: { bytes: 1, dtype: 'float8_e4m3fn' },
  F8_E5M2: { bytes: 1, dtype: 'float8_e5m2' },
  F8_E8M0: { bytes: 1 },
  I16: { bytes: 2 },
  U16: { bytes: 2 },
  F16: { bytes: 2, dtype: 'float16' },
  BF16: { bytes: 2, dtype: 'bfloat16' },
  I32: { bytes: 4, dtype: 'int32' },
  U32: { bytes: 4 },
  F32: { bytes: 4, dtype: 'float32' },
  I64: { bytes: 8, dtype: 'int64' },
  U64: { bytes: 8 },
  F64: { bytes: 8 },
};

/** The safetensors name of a tensorgpu dtype. */
export function safetensorsDTypeName(dtype: DType): string {
  const name = Object.keys(SAFETENSORS_DTYPES).find((k) => SAFETENSORS_DTYPES[k].dtype === dtype);
  if (!name) throw new CheckpointError(`dtype ${dtype} has no safetensors name`);
  return name;
}

export interface SafetensorsEntry {
  readonly name: string;
  /** The safetensors dtype name (F8_E4M3, BF16, ...). */
  readonly format: string;
  /** The tensorgpu dtype, or undefined when the format has none (the tensor can be listed but not loaded). */
  readonly dtype?: DType;
  readonly shape: readonly number[];
  /** Absolute byte range in the file. */
  readonly begin: number;
  readonly end: number;
}

export interface SafetensorsHeader {
  readonly entries: ReadonlyMap<string, SafetensorsEntry>;
  readonly metadata: Readonly<Record<string, string>>;
  /** File offset of the data section (8 + header length). */
  readonly dataStart: number;
}

/** Byte length of the JSON header, read from the first 8 bytes, checked against the file size. */
export function headerLength(prefix: Uint8Array, fileSize: number, file: string): number {
  if (fileSize < 8 || prefix.length < 8) {
    throw new CheckpointError(`file is ${fileSize} bytes; a safetensors file starts with an 8-byte header length`, { file, offset: 0 });
  }
  const n = new DataView(prefix.buffer, prefix.byteOffset, 8).getBigUint64(0, true);
  if (n > BigInt(fileSize - 8)) {
    throw new CheckpointError(`header length ${n} is larger than the ${fileSize - 8} bytes after the length field`, { file, offset: 0 });
  }
  if (n > BigInt(MAX_HEADER_BYTES)) {
    throw new CheckpointError(`header length ${n} exceeds the ${MAX_HEADER_BYTES}-byte limit`, { file, offset: 0 });
  }
  if (n < 2n) throw new CheckpointError(`header length ${n} is too short for a JSON object`, { file, offset: 0 });
  return Number(n);
}

/** Index of the first byte that breaks UTF-8 (overlongs, surrogates and truncated sequences included), or -1. */
export function firstInvalidUtf8(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i];
    if (b < 0x80) {
      i++;
      continue;
    }
    const [len, lo, hi] =
      b >= 0xc2 && b <= 0xdf
        ? [2, 0x80, 0xbf]
        : b === 0xe0
          ? [3, 0xa0, 0xbf]
          : b === 0xed
            ? [3, 0x80, 0x9f]
            : b >= 0xe1 && b <= 0xef
              ? [3, 0x80, 0xbf]
              : b === 0xf0
                ? [4, 0x90, 0xbf]
                : b === 0xf4
                  ? [4, 0x80, 0x8f]
                  : b >= 0xf1 && b <= 0xf3
                    ? [4, 0x80, 0xbf]
                    : [0, 0, 0];
    if (len === 0) return i;
    for (let j = 1; j < len; j++) {
      const c = bytes[i + j];
      if (c === undefined || c < (j === 1 ? lo : 0x80) || c > (j === 1 ? hi : 0xbf)) return i;
    }
    i += len;
  }
  return -1;
}

const isCount = (x: unknown): x is number => typeof x === 'number' && Number.isSafeInteger(x) && x >= 0;
const isRecord = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

/** A value for an error message. Bounded: a hostile header can nest arrays too deep for JSON.stringify's recursion. */
function show(x: unknown): string {
  try {
    const s = JSON.stringify(x) ?? String(x);
    return s.length > 200 ? `${s.slice(0, 200)}...` : s;
  } catch {
    return `(a ${Array.isArray(x) ? 'list' : typeof x} nested too deeply to print)`;
  }
}

/**
 * Parses and validates the header JSON (`json`: the header's bytes, which start at file offset 8). Checks: UTF-8,
 * JSON syntax, a top-level object with no duplicate keys, `__metadata__` a string map, each entry a known dtype with
 * a shape of non-negative integers and data_offsets [begin, end] whose length is numel x element size, and the
 * entries tiling the data section exactly: no gap, no overlap, nothing past the end.
 */
export function parseHeader(json: Uint8Array, fileSize: number, file: string): SafetensorsHeader {
  const dataStart = 8 + json.length;
  const bad = firstInvalidUtf8(json);
  if (bad >= 0) throw new CheckpointError('header is not valid UTF-8', { file, offset: 8 + bad });
  // ignoreBOM: keep a leading U+FEFF so JSON.parse rejects it (as the Rust crate does) and string indices stay
  // aligned with header bytes.
  const text = new TextDecoder('utf-8', { ignoreBOM: true }).decode(json);
  let root: unknown;
  try {
    root = JSON.parse(text);
  } catch (e) {
    throw new CheckpointError(`header (bytes 8..${dataStart}) is not valid JSON: ${(e as Error).message}`, { file, offset: 8 });
  }
  if (!isRecord(root)) throw new CheckpointError('header is not a JSON object', { file, offset: 8 });
  const dup = firstDuplicateKey(text);
  if (dup !== undefined)
    throw new CheckpointError(`header names '${dup.key}' twice`, { file, offset: 8 + new TextEncoder().encode(text.slice(0, dup.index)).length });

  let metadata: Record<string, string> = {};
  const raw = root.__metadata__;
  if (raw !== undefined) {
    if (!isRecord(raw)) throw new CheckpointError('__metadata__ is not an object of strings', { file, offset: 8 });
    for (const [k, v] of Object.entries(raw)) {
      if (typeof v !== 'string') throw new CheckpointError(`__metadata__ value '${k}' is not a string`, { file, offset: 8 });
    }
    // fromEntries defines own properties: assigning metadata['__proto__'] would drop that key.
    metadata = Object.fromEntries(Object.entries(raw)) as Record<string, string>;
  }

  const dataBytes = fileSize - dataStart;
  const entries: SafetensorsEntry[] = [];
  for (const [name, info] of Object.entries(root)) {
    if (name === '__metadata__') continue;
    const where = { file, tensor: name, offset: 8 };
    if (!isRecord(info)) throw new CheckpointError('entry is not an object with dtype, shape and data_offsets', where);
    const { dtype: format, shape, data_offsets: offsets } = info;
    if (typeof format !== 'string') throw new CheckpointError('dtype is missing or not a string', where);
    const kind = Object.hasOwn(SAFETENSORS_DTYPES, format) ? SAFETENSORS_DTYPES[format] : undefined;
    if (!kind) throw new CheckpointError(`unknown or unsupported dtype '${format}' (known: ${Object.keys(SAFETENSORS_DTYPES).join(', ')})`, where);
    if (!Array.isArray(shape) || !shape.every(isCount)) throw new CheckpointError(`shape ${show(shape)} is not a list of non-negative integers`, where);
    if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every(isCount)) {
      throw new CheckpointError(`data_offsets ${show(offsets)} is not [begin, end] with non-negative integers`, where);
    }
    const [begin, end] = offsets as [number, number];
    if (begin > end) throw new CheckpointError(`data_offsets [${begin}, ${end}] end before they begin`, { ...where, offset: dataStart + begin });
    if (end > dataBytes) {
      throw new CheckpointError(`data_offsets [${begin}, ${end}] run past the end of the data section (${dataBytes} bytes)`, {
        ...where,
        offset: dataStart + begin,
      });
    }
    // BigInt: a hostile shape can overflow 2^53 long before it is compared.
    const expected = (shape as number[]).reduce((acc, d) => acc * BigInt(d), BigInt(kind.bytes));
    if (expected !== BigInt(end - begin)) {
      throw new CheckpointError(`shape [${shape.join(', ')}] of ${format} needs ${expected} bytes but data_offsets [${begin}, ${end}] hold ${end - begin}`, {
        ...where,
        offset: dataStart + begin,
      });
    }
    entries.push({ name, format, dtype: kind.dtype, shape: [...(shape as number[])], begin: dataStart + begin, end: dataStart + end });
  }

  // The data section must be tiled exactly, as the format requires: sorted by offset, each tensor starts where the
  // previous one ended and the last one ends at the end of the file.
  const sorted = [...entries].sort((x, y) => x.begin - y.begin || x.end - y.end);
  let at = dataStart;
  for (const e of sorted) {
    if (e.begin < at)
      throw new CheckpointError(`data [${e.begin - dataStart}, ${e.end - dataStart}] overlaps the tensor before it, which ends at ${at - dataStart}`, {
        file,
        tensor: e.name,
        offset: e.begin,
      });
    if (e.begin > at)
      throw new CheckpointError(`data starts at ${e.begin - dataStart}, leaving a gap after ${at - dataStart}`, { file, tensor: e.name, offset: e.begin });
    at = e.end;
  }
  if (at !== fileSize) throw new CheckpointError(`the tensors end at byte ${at} but the file has ${fileSize} bytes (trailing data)`, { file, offset: at });
  return { entries: new Map(entries.map((e) => [e.name, e])), metadata, dataStart };
}
