import { allocStorage, castCode, decodeOne, encodeInt64, scalarValue, type StorageArray } from '../../core/codecs.js';

import { DTYPE_INFO, int64WordView, type DType } from '../../core/dtype.js';
import { DTypeError } from '../../core/errors.js';
import { coalesceViews, numel, type Shape, type View } from '../../core/shape.js';
import { isScalarOperand, type Backend, type BinaryOp, type Operand, type ScalarOperand, type UnaryOp } from '../backend.js';
import { BINARY_F64, BINARY_I32, UNARY_F64, UNARY_I32 } from './scalar-ops.js';

type Handle = StorageArray;

/** Storage index of every element of a view, in row-major order. */
export function viewIndices(view: View): Int32Array {
  const n = numel(view.shape);
  const out = new Int32Array(n);
  const rank = view.shape.length;
  const idx = new Array<number>(rank).fill(0);
  let off = view.offset;
  for (let i = 0; i < n; i++) {
    out[i] = off;
    for (let d = rank - 1; d >= 0; d--) {
      idx[d]++;
      off += view.strides[d];
      if (idx[d] < view.shape[d]) break;
      off -= view.strides[d] * view.shape[d];
      idx[d] = 0;
    }
  }
  return out;
}

const decodeTables = new Map<DType, Float64Array>();

/** Every code's value, for the 8- and 16-bit float dtypes (a table lookup instead of bit decoding per element). */
function decodeTable(dtype: DType): Float64Array {
  let table = decodeTables.get(dtype);
  if (!table) {
    table = new Float64Array(DTYPE_INFO[dtype].itemBytes === 1 ? 256 : 65536);
    for (let c = 0; c < table.length; c++) table[c] = decodeOne(dtype, c);
    decodeTables.set(dtype, table);
  }
  return table;
}

/** The storage-code -> value table of a dtype, or undefined where the storage holds the values themselves. */
export function valueTable(dtype: DType): Float64Array | undefined {
  const direct = dtype === 'float32' || dtype === 'int32' || dtype === 'uint8' || dtype === 'bool';
  return direct ? undefined : decodeTable(dtype);
}

/** The view's storage codes, row-major, unconverted. */
function gatherCodes(src: Operand<Handle>): Handle {
  const idx = viewIndices(src.view);
  const out = allocStorage(src.dtype, idx.length);
  // float32 moves as raw bits: a JS number would quiet a signaling NaN's payload.
  const from = src.handle instanceof Float32Array ? new Uint32Array(src.handle.buffer, src.handle.byteOffset, src.handle.length) : src.handle;
  const to = out instanceof Float32Array ? new Uint32Array(out.buffer, out.byteOffset, out.length) : out;
  for (let i = 0; i < idx.length; i++) to[i] = from[idx[i]];
  return out;
}

/**
 * An int64 operand as the int32 operand of its words (element [..i] is [..i, 0] lo, [..i, 1] hi): how int64 data
 * moves (reads, copies, where) through the int32 paths.
 */
export function int64Words<H>(x: Operand<H>): Operand<H> {
  return { handle: x.handle, dtype: 'int32', view: int64WordView(x.view) };
}

/** int64 reaching a float64 path: no int64 value survives a double past 2^53, so this refuses it. */
function refuseInt64(what: string): never {
  throw new DTypeError(`${what} does not support int64 (it would compute in float64); use an op that supports int64, or cast first`);
}

/** The view's values as float64, row-major. */
export function values(src: Operand<Handle>): Float64Array {
  if (src.dtype === 'int64') refuseInt64('this op');
  // Contiguous runs of dims merge (a [1, rows, L] batch of rows is 2-D), so more views take the loop below.
  const { shape, strides, offset } = src.view.shape.length > 2 ? coalesceViews([src.view])[0] : src.view;
  const h = src.handle;
  const table = valueTable(src.dtype);
  // Rank <= 2 (weights, transposed weights, rows): nested loops, no index array; model-sized tensors hit this.
  if (shape.length <= 2) {
    const [rows, cols] = shape.length === 2 ? shape : [1, shape[0] ?? 1];
    const [rs, cs] = shape.length === 2 ? strides : [0, strides[0] ?? 1];
    const out = new Float64Array(rows * cols);
    let at = 0;
    for (let r = 0; r < rows; r++) {
      let i = offset + r * rs;
      if (table) for (let c = 0; c < cols; c++, i += cs) out[at++] = table[h[i]];
      else for (let c = 0; c < cols; c++, i += cs) out[at++] = h[i];
    }
    return out;
  }
  const idx = viewIndices(src.view);
  const out = new Float64Array(idx.length);
  if (table) for (let i = 0; i < idx.length; i++) out[i] = table[h[idx[i]]];
  else for (let i = 0; i < idx.length; i++) out[i] = h[idx[i]];
  return out;
}

/**
 * Converts one value to dtype's storage code. Float -> int truncates toward zero and saturates to int32 (NaN -> 0),
 * uint8 then wraps mod 256, bool is x != 0: the same rules as the GPU cast kernel.
 */

export function store(values: Float64Array, dtype: DType, saturate = false): Handle {
  const out = allocStorage(dtype, values.length);
  for (let i = 0; i < values.length; i++) out[i] = castCode(values[i], dtype, saturate);
  return out;
}

const isInt = (dtype: DType) => !DTYPE_INFO[dtype].isFloating;

/** The int32 entries of a 1-D (or 0-D) view, in order. */
export function ints(t: Operand<Handle>): number[] {
  return Array.from(values(t));
}

export class CpuBackend implements Backend<Handle> {
  readonly device = 'cpu' as const;

  upload(_dtype: DType, data: StorageArray): Handle {
    return data.slice();
  }

  allocBytes(dtype: DType, n: number): Handle {
    return allocStorage(dtype, n);
  }

  writeBytes(handle: Handle, byteOffset: number, bytes: Uint8Array): void {
    new Uint8Array(handle.buffer, handle.byteOffset, handle.byteLength).set(bytes, byteOffset);
  }

  async synchronize(): Promise<void> {}

  fill(dtype: DType, n: number, value: number): Handle {
    if (dtype === 'int64') {
      const [lo, hi] = encodeInt64([value]);
      const out = new Int32Array(2 * n);
      for (let i = 0; i < n; i++) [out[2 * i], out[2 * i + 1]] = [lo, hi];
      return out;
    }
    const out = allocStorage(dtype, n);
    out.fill(castCode(value, dtype));
    return out;
  }

  free(): void {}

  async read(src: Operand<Handle>): Promise<StorageArray> {
    return gatherCodes(src.dtype === 'int64' ? int64Words(src) : src);
  }

  cast(src: Operand<Handle>, outDtype: DType, saturate: boolean): Handle {
    // A saturating fp8 -> same fp8 cast still clamps Inf (e5m2) to the largest finite value, as the GPU kernel does.
    if (src.dtype === 'int64' && outDtype === 'int64') return gatherCodes(int64Words(src));
    if (src.dtype === 'int64' || outDtype === 'int64') refuseInt64(`the backend cast ${src.dtype} -> ${outDtype} (ops/convert routes it)`);
    if (src.dtype === outDtype && !saturate) return gatherCodes(src);
    return store(values(src), outDtype, saturate);
  }

  copyInto(src: Operand<Handle>, dst: Operand<Handle>): void {
    if (src.dtype === 'int64' && dst.dtype === 'int64') return this.copyInto(int64Words(src), int64Words(dst));
    const v = values(src);
    const idx = viewIndices(dst.view);
    for (let i = 0; i < idx.length; i++) dst.handle[idx[i]] = castCode(v[i], dst.dtype);
  }

  unary(op: UnaryOp, x: Operand<Handle>, outDtype: DType): Handle {
    const v = values(x);
    const f = isInt(x.dtype) && isInt(outDtype) ? (UNARY_I32[op] ?? UNARY_F64[op]) : UNARY_F64[op];
    for (let i = 0; i < v.length; i++) v[i] = f(v[i]);
    return store(v, outDtype);
  }

  binary(op: BinaryOp, a: Operand<Handle> | ScalarOperand, b: Operand<Handle> | ScalarOperand, outShape: Shape, outDtype: DType): Handle {
    const n = numel(outShape);
    const operand = (x: Operand<Handle> | ScalarOperand) => (isScalarOperand(x) ? new Float64Array(n).fill(scalarValue(x)) : values(x));
    const va = operand(a);
    const vb = operand(b);
    const integer = isInt(a.dtype) && isInt(b.dtype) && isInt(outDtype);
    const f = integer ? BINARY_I32[op] : BINARY_F64[op];
    const out = new Float64Array(n);
    for (let i = 0; i < n; i++) out[i] = f(va[i], vb[i]);
    return store(out, outDtype);
  }

  where(cond: Operand<Handle>, a: Operand<Handle> | ScalarOperand, b: Operand<Handle> | ScalarOperand, outShape: Shape, outDtype: DType): Handle {
    if (outDtype === 'int64') {
      if (isScalarOperand(a) || isScalarOperand(b) || a.dtype !== 'int64' || b.dtype !== 'int64') refuseInt64('where with a number or a non-int64 side');
      // The condition repeats over each element's two words.
      const pairs = { ...cond, view: { shape: [...cond.view.shape, 2], strides: [...cond.view.strides, 0], offset: cond.view.offset } };
      return this.where(pairs, int64Words(a), int64Words(b), [...outShape, 2], 'int32');
    }
    const n = numel(outShape);
    const c = gatherCodes(cond);
    // Storage of each side in outDtype; of outDtype already, codes are selected as they are (NaN payloads, FP8).
    const side = (x: Operand<Handle> | ScalarOperand): Handle =>
      isScalarOperand(x) ? store(new Float64Array([scalarValue(x)]), outDtype) : x.dtype === outDtype ? gatherCodes(x) : store(values(x), outDtype);
    const [sa, sb] = [side(a), side(b)];
    const out = allocStorage(outDtype, n);
    // float32 moves as raw bits: a JS number would quiet a signaling NaN's payload.
    const bits = (h: Handle) => (h instanceof Float32Array ? new Uint32Array(h.buffer, h.byteOffset, h.length) : h);
    const [ba, bb, bo] = [bits(sa), bits(sb), bits(out)];
    const [stepA, stepB] = [isScalarOperand(a) ? 0 : 1, isScalarOperand(b) ? 0 : 1];
    for (let i = 0; i < n; i++) bo[i] = c[i] ? ba[i * stepA] : bb[i * stepB];
    return out;
  }
}
