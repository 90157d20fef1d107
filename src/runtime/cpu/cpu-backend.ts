// The reference backend: plain loops over float64 values, exact enough to judge every GPU kernel.
import { swigluReference } from './swiglu.js';
import { allocStorage, castCode, decodeOne, scalarValue, type StorageArray } from '../../core/codecs.js';

import { DTYPE_INFO, type DType } from '../../core/dtype.js';
import { coalesceViews, numel, type Shape, type View } from '../../core/shape.js';
import {
  isScalarOperand,
  type Backend,
  type BinaryOp,
  type MatmulDims,
  type MatmulScaling,
  type Operand,
  type ScalarOperand,
  type ReduceOp,
  type UnaryOp,
} from '../backend.js';
import { BINARY_F64, BINARY_I32, REDUCE_F64, UNARY_F64, UNARY_I32 } from './scalar-ops.js';

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

/** The view's values as float64, row-major. */
export function values(src: Operand<Handle>): Float64Array {
  // Contiguous runs of dims merge (a [1, rows, L] batch of rows is 2-D), so more views take the loop below.
  const { shape, strides, offset } = src.view.shape.length > 2 ? coalesceViews([src.view])[0] : src.view;
  const h = src.handle;
  const direct = src.dtype === 'float32' || src.dtype === 'int32' || src.dtype === 'uint8' || src.dtype === 'bool';
  const table = direct ? undefined : decodeTable(src.dtype);
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
    const out = allocStorage(dtype, n);
    out.fill(castCode(value, dtype));
    return out;
  }

  free(): void {}

  async read(src: Operand<Handle>): Promise<StorageArray> {
    return gatherCodes(src);
  }

  cast(src: Operand<Handle>, outDtype: DType, saturate: boolean): Handle {
    // A saturating fp8 -> same fp8 cast still clamps Inf (e5m2) to the largest finite value, as the GPU kernel does.
    if (src.dtype === outDtype && !saturate) return gatherCodes(src);
    return store(values(src), outDtype, saturate);
  }

  copyInto(src: Operand<Handle>, dst: Operand<Handle>): void {
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

  reduce(op: ReduceOp, x: Operand<Handle>, dim: number, outDtype: DType): Handle {
    const shape = x.view.shape;
    const outer = numel(shape.slice(0, dim));
    const size = shape[dim];
    const inner = numel(shape.slice(dim + 1));
    const v = values(x);
    const out = new Float64Array(outer * inner);
    for (let o = 0; o < outer; o++) {
      for (let i = 0; i < inner; i++) {
        const base = o * size * inner + i;
        const r = op === 'argmax' || op === 'argmin' ? argExtreme(v, base, size, inner, op === 'argmax') : fold(op, v, base, size, inner);
        // Integer sums wrap like int32 arithmetic (as binary add does and the GPU accumulates), not saturate.
        out[o * inner + i] = op === 'sum' && isInt(outDtype) ? r | 0 : r;
      }
    }
    return store(out, outDtype);
  }

  matmul(a: Operand<Handle>, b: Operand<Handle>, dims: MatmulDims, outDtype: DType, scaling: MatmulScaling<Handle> = {}): Handle {
    if (scaling.activation === 'swiglu') {
      // The unfused chain's roundings: the product in outDtype, SwiGLU, then the residual add.
      const { activation: _, residual, ...rest } = scaling;
      const half = dims.n / 2;
      const full = this.matmul(a, b, dims, outDtype, rest);
      const act = swigluReference({ handle: full, dtype: outDtype, view: { shape: [dims.m, dims.n], strides: [dims.n, 1], offset: 0 } });
      if (!residual) return act;
      return this.binary(
        'add',
        { handle: act, dtype: outDtype, view: { shape: [dims.m, half], strides: [half, 1], offset: 0 } },
        residual,
        [dims.m, half],
        outDtype,
      );
    }
    const { m, n, k } = dims;
    const batch = numel(dims.batch);
    const va = values(a);
    const vb = values(b);
    applyBlockScales(va, vb, dims, scaling);
    const out = new Float64Array(batch * m * n);
    const row = new Float64Array(n);
    for (let bi = 0; bi < batch; bi++) {
      const ao = bi * m * k;
      const bo = bi * k * n;
      for (let i = 0; i < m; i++) {
        row.fill(0);
        for (let p = 0; p < k; p++) {
          const av = va[ao + i * k + p];
          const bRow = bo + p * n;
          for (let j = 0; j < n; j++) row[j] += av * vb[bRow + j];
        }
        out.set(row, (bi * m + i) * n);
      }
    }
    if (!scaling.scaleA && !scaling.scaleB && !scaling.bias && !scaling.scaleResult && !scaling.residual) return store(out, outDtype);
    const sa = scaling.scaleA;
    const sb = scaling.scaleB;
    const bias = scaling.bias ? values(scaling.bias) : undefined;
    const residual = scaling.residual ? values(scaling.residual) : undefined;
    const result = scaling.scaleResult ? scaling.scaleResult[0] : 1;
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let v = out[i * n + j];
        if (sa && sa.recipe !== 'block') v *= sa.handle[sa.recipe === 'row' ? i : 0];
        if (sb && sb.recipe !== 'block') v *= sb.handle[sb.recipe === 'row' ? j : 0];
        if (bias) v += bias[j];
        // The GPU epilogue rounds the product to float32 before adding the residual, as matmul then add would.
        out[i * n + j] = residual ? Math.fround(v * result) + residual[i * n + j] : v * result;
      }
    }
    // Scaled FP8 outputs saturate, as the GPU epilogue does.
    return store(out, outDtype, true);
  }
}

/** Multiplies 1x128 / 128x128 block scales into the operand values (2-D a [m, k], b [k, n]). */
function applyBlockScales(va: Float64Array, vb: Float64Array, dims: MatmulDims, s: MatmulScaling<Handle>): void {
  const { m, n, k } = dims;
  const kb = Math.ceil(k / 128);
  if (s.scaleA?.recipe === 'block') {
    const t = s.scaleA.handle;
    for (let i = 0; i < m; i++) for (let p = 0; p < k; p++) va[i * k + p] *= t[i * kb + Math.floor(p / 128)];
  }
  if (s.scaleB?.recipe === 'block') {
    const t = s.scaleB.handle;
    for (let p = 0; p < k; p++) for (let j = 0; j < n; j++) vb[p * n + j] *= t[Math.floor(j / 128) * kb + Math.floor(p / 128)];
  }
}

function fold(op: Exclude<ReduceOp, 'argmax' | 'argmin'>, v: Float64Array, base: number, size: number, stride: number): number {
  const r = REDUCE_F64[op];
  let acc = r.init;
  for (let j = 0; j < size; j++) acc = r.step(acc, v[base + j * stride]);
  return op === 'mean' ? acc / size : acc;
}

/** Index of the first extreme value; a NaN counts as the extreme (torch.argmax). */
function argExtreme(v: Float64Array, base: number, size: number, stride: number, max: boolean): number {
  let best = 0;
  let bestV = v[base];
  for (let j = 1; j < size; j++) {
    if (Number.isNaN(bestV)) break;
    const x = v[base + j * stride];
    if (Number.isNaN(x) || (max ? x > bestV : x < bestV)) {
      best = j;
      bestV = x;
    }
  }
  return best;
}
