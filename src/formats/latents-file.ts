// Latent tensors for `tensorgpu vae-decode`: read from .safetensors (what diffusers pipelines save) or .npy (what
// `numpy.save` writes), always as float32 [B, C, T, h, w]. Nothing in a file is trusted: the NumPy header is parsed
// as the Python literal it is (not evaluated), and the data length is checked against the shape before a value is
// used, with every problem a CheckpointError naming the file and byte offset.
import { open } from 'node:fs/promises';
import { extname } from 'node:path';
import type { DeviceName } from '../runtime/backend.js';
import { getDefaultDevice } from '../runtime/registry.js';
import { f16BitsToF32 } from '../core/codecs.js';
import { isFloating } from '../core/dtype.js';
import { CheckpointError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from '../ops/creation.js';
import { SafetensorsFile } from './safetensors-reader.js';
import { tensorSource, writeSafetensors } from './safetensors-writer.js';

export interface ReadLatentsOptions {
  device?: DeviceName;
}

/** The tensor name looked for when a safetensors file holds several. */
export const LATENTS_TENSOR = 'latents';

/**
 * Reads latents from `.safetensors` (the only tensor, or the one named 'latents') or `.npy` (format v1-v3,
 * little-endian f4 / f2 / f8, C order) as float32 on `device`. [C, T, h, w] gains a batch dim and [C, h, w] a batch
 * and a time dim, so the result is always [B, C, T, h, w].
 */
export async function readLatents(path: string, options: ReadLatentsOptions = {}): Promise<Tensor> {
  const device = options.device ?? getDefaultDevice();
  const ext = extname(path).toLowerCase();
  if (ext === '.safetensors') return readSafetensorsLatents(path, device);
  if (ext === '.npy') return readNpyLatents(path, device);
  throw new CheckpointError(`unsupported latents file type '${ext || '(no extension)'}': expected .safetensors or .npy`, { file: path });
}

/** Writes latents as a one-tensor safetensors file (tensor 'latents'), readable by readLatents and diffusers. */
export async function writeLatents(path: string, latents: Tensor): Promise<void> {
  await writeSafetensors(path, [[LATENTS_TENSOR, tensorSource(latents)]]);
}

/** [B, C, T, h, w] from the accepted ranks, or an error naming the shape. */
function latentShape(shape: readonly number[], where: { file: string; tensor?: string; offset: number }): number[] {
  if (shape.length === 5) return [...shape];
  if (shape.length === 4) return [1, ...shape];
  if (shape.length === 3) return [1, shape[0], 1, shape[1], shape[2]];
  throw new CheckpointError(`latents have rank ${shape.length} (shape [${shape.join(', ')}]); expected [B, C, T, h, w], [C, T, h, w] or [C, h, w]`, where);
}

async function readSafetensorsLatents(path: string, device: DeviceName): Promise<Tensor> {
  await using file = await SafetensorsFile.open(path);
  const names = file.names;
  if (names.length === 0) throw new CheckpointError('holds no tensors', { file: path, offset: 8 });
  const name = names.length === 1 ? names[0] : file.has(LATENTS_TENSOR) ? LATENTS_TENSOR : undefined;
  if (name === undefined) {
    const listed = names.slice(0, 8).join(', ') + (names.length > 8 ? ', ...' : '');
    throw new CheckpointError(`holds ${names.length} tensors and none is named '${LATENTS_TENSOR}' (${listed})`, { file: path, offset: 8 });
  }
  const e = file.entry(name);
  const where = { file: path, tensor: name, offset: e.begin };
  const shape = latentShape(e.shape, where);
  if (e.format === 'F64') {
    // No float64 dtype here: narrowed on the host, as the .npy reader does.
    const bytes = await file.readBytes(name);
    return tensor(f64ToF32(bytes), { shape, device });
  }
  if (!e.dtype || !isFloating(e.dtype)) throw new CheckpointError(`unsupported latents dtype ${e.format}: expected F32, F16, BF16 or F64`, where);
  const t = await file.load(name, { device, dtype: 'float32' });
  if (t.shape.length === 5) return t;
  const r = t.reshape(shape);
  t.dispose();
  return r;
}

const NPY_MAGIC = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]; // \x93NUMPY
/** NumPy dtype descriptors read, with their element size. */
const NPY_DTYPES: Readonly<Record<string, number>> = { '<f4': 4, '<f2': 2, '<f8': 8 };

async function readNpyLatents(path: string, device: DeviceName): Promise<Tensor> {
  let bytes: Uint8Array;
  try {
    const fh = await open(path, 'r');
    try {
      bytes = await fh.readFile();
    } finally {
      await fh.close();
    }
  } catch (e) {
    throw new CheckpointError(`cannot read: ${(e as Error).message}`, { file: path });
  }
  const { descr, shape, dataStart } = parseNpyHeader(bytes, path);
  const item = NPY_DTYPES[descr];
  const dims = latentShape(shape, { file: path, offset: dataStart });
  const count = shape.reduce((a, d) => a * d, 1);
  const need = count * item;
  const have = bytes.length - dataStart;
  if (have < need)
    throw new CheckpointError(`data has ${have} bytes, shape (${shape.join(', ')}) of ${descr} needs ${need}`, { file: path, offset: dataStart });
  if (have > need)
    throw new CheckpointError(`${have - need} trailing bytes after the ${need} bytes of data that shape (${shape.join(', ')}) of ${descr} needs`, {
      file: path,
      offset: dataStart + need,
    });
  const data = bytes.subarray(dataStart, dataStart + need);
  return tensor(toF32(descr, data), { shape: dims, device });
}

function toF32(descr: string, data: Uint8Array): Float32Array {
  if (descr === '<f8') return f64ToF32(data);
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  if (descr === '<f2') {
    const out = new Float32Array(data.length / 2);
    for (let i = 0; i < out.length; i++) out[i] = f16BitsToF32(view.getUint16(i * 2, true));
    return out;
  }
  const out = new Float32Array(data.length / 4);
  for (let i = 0; i < out.length; i++) out[i] = view.getFloat32(i * 4, true);
  return out;
}

function f64ToF32(data: Uint8Array): Float32Array {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const out = new Float32Array(data.length / 8);
  for (let i = 0; i < out.length; i++) out[i] = view.getFloat64(i * 8, true);
  return out;
}

interface NpyHeader {
  descr: string;
  shape: number[];
  /** File offset of the first data byte. */
  dataStart: number;
}

/**
 * The NumPy format's preamble and header: magic, version (1.0: u16 header length at byte 8; 2.0 / 3.0: u32), then a
 * Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)} padded with spaces and a newline.
 */
export function parseNpyHeader(bytes: Uint8Array, file: string): NpyHeader {
  if (bytes.length < 10 || NPY_MAGIC.some((b, i) => bytes[i] !== b)) {
    throw new CheckpointError(`not a NumPy .npy file (the first 6 bytes must be \\x93NUMPY)`, { file, offset: 0 });
  }
  const major = bytes[6];
  if (major < 1 || major > 3) throw new CheckpointError(`unsupported .npy format version ${major}.${bytes[7]} (1.0 to 3.0 are read)`, { file, offset: 6 });
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (major > 1 && bytes.length < 12) throw new CheckpointError(`file ends inside the header length`, { file, offset: 8 });
  const headerLen = major === 1 ? view.getUint16(8, true) : view.getUint32(8, true);
  const headerStart = major === 1 ? 10 : 12;
  const dataStart = headerStart + headerLen;
  if (dataStart > bytes.length) {
    throw new CheckpointError(`header claims ${headerLen} bytes, the file has ${bytes.length - headerStart} after the preamble`, { file, offset: 8 });
  }
  // Version 3.0 allows UTF-8 in the header (field names); 1.0 and 2.0 are latin-1.
  const text = new TextDecoder(major === 3 ? 'utf-8' : 'latin1').decode(bytes.subarray(headerStart, dataStart));
  let dict: PyValue;
  try {
    dict = parsePyLiteral(text);
  } catch (e) {
    throw new CheckpointError(`header is not a Python dict literal: ${(e as Error).message}`, { file, offset: headerStart });
  }
  if (!(dict instanceof Map)) throw new CheckpointError(`header is not a dict: ${text.trim().slice(0, 80)}`, { file, offset: headerStart });
  for (const key of ['descr', 'fortran_order', 'shape']) {
    if (!dict.has(key)) throw new CheckpointError(`header has no '${key}' key: ${text.trim().slice(0, 120)}`, { file, offset: headerStart });
  }
  const descr = dict.get('descr');
  if (typeof descr !== 'string' || !Object.hasOwn(NPY_DTYPES, descr)) {
    const shown = typeof descr === 'string' ? `dtype '${descr}'` : 'structured dtype';
    throw new CheckpointError(`unsupported ${shown}: expected '<f4', '<f2' or '<f8' (little-endian float)`, { file, offset: headerStart });
  }
  const fortran = dict.get('fortran_order');
  if (typeof fortran !== 'boolean') throw new CheckpointError(`'fortran_order' must be True or False`, { file, offset: headerStart });
  if (fortran) throw new CheckpointError(`array is in Fortran order; save it in C order (numpy.ascontiguousarray) first`, { file, offset: headerStart });
  const shape = dict.get('shape');
  if (!Array.isArray(shape) || !shape.every((d): d is number => typeof d === 'number' && Number.isSafeInteger(d) && d >= 0)) {
    throw new CheckpointError(`'shape' must be a tuple of non-negative integers`, { file, offset: headerStart });
  }
  return { descr, shape, dataStart };
}

type PyValue = string | number | boolean | null | PyValue[] | Map<string, PyValue>;

/** Parses the Python literals a .npy header uses: dicts with string keys, tuples, lists, strings, ints, booleans. */
function parsePyLiteral(text: string): PyValue {
  let i = 0;
  const skip = () => {
    while (i < text.length && /\s/.test(text[i])) i++;
  };
  const fail = (what: string): never => {
    throw new Error(`${what} at character ${i}`);
  };
  const value = (): PyValue => {
    skip();
    const c = text[i];
    if (c === '{') {
      i++;
      const map = new Map<string, PyValue>();
      for (;;) {
        skip();
        if (text[i] === '}') {
          i++;
          return map;
        }
        const key = value();
        if (typeof key !== 'string') fail('expected a string key');
        skip();
        if (text[i] !== ':') fail("expected ':'");
        i++;
        if (map.has(key as string)) fail(`duplicate key '${key as string}'`);
        map.set(key as string, value());
        skip();
        if (text[i] === ',') i++;
        else if (text[i] !== '}') fail("expected ',' or '}'");
      }
    }
    if (c === '(' || c === '[') {
      const close = c === '(' ? ')' : ']';
      i++;
      const items: PyValue[] = [];
      for (;;) {
        skip();
        if (text[i] === close) {
          i++;
          return items;
        }
        items.push(value());
        skip();
        if (text[i] === ',') i++;
        else if (text[i] !== close) fail(`expected ',' or '${close}'`);
      }
    }
    if (c === "'" || c === '"') {
      const end = text.indexOf(c, i + 1);
      if (end < 0) fail('unterminated string');
      const s = text.slice(i + 1, end);
      i = end + 1;
      return s;
    }
    const word = /^[A-Za-z_]\w*|^[-+]?\d+L?/.exec(text.slice(i))?.[0];
    if (word === undefined) return fail('unexpected character');
    i += word.length;
    if (word === 'True') return true;
    if (word === 'False') return false;
    if (word === 'None') return null;
    if (/^[-+]?\d+L?$/.test(word)) return Number(word.replace('L', ''));
    return fail(`unexpected name '${word}'`);
  };
  const v = value();
  skip();
  if (i < text.length) fail('unexpected text after the dict');
  return v;
}
