// The float64 reference of matmul with its FP8 scalings and fused epilogues (bias, scales, SwiGLU, residual): the
// oracle of its WebGPU GEMV and GEMM.
import { numel } from '../../core/shape.js';
import type { DType } from '../../core/dtype.js';
import type { StorageArray } from '../../core/codecs.js';
import type { MatmulDims, MatmulScaling, Operand } from '../../runtime/backend.js';
import { type CpuBackend, store, valueTable, values } from '../../runtime/cpu/cpu-backend.js';
import { swigluReference } from '../swiglu/cpu.js';
import { UNARY_F64 } from '../../runtime/cpu/scalar-ops.js';
import { int4DequantValues } from '../int4/cpu.js';

type Handle = StorageArray;

export function matmulReference(
  backend: CpuBackend,
  a: Operand<Handle>,
  b: Operand<Handle>,
  dims: MatmulDims,
  outDtype: DType,
  scaling: MatmulScaling<Handle> = {},
): Handle {
  if (scaling.activation === 'swiglu') {
    // The unfused chain's roundings: the product in outDtype, SwiGLU, then the residual add.
    const { activation: _, residual, ...rest } = scaling;
    const half = dims.n / 2;
    const full = matmulReference(backend, a, b, dims, outDtype, rest);
    const act = swigluReference({ handle: full, dtype: outDtype, view: { shape: [dims.m, dims.n], strides: [dims.n, 1], offset: 0 } });
    if (!residual) return act;
    return backend.binary(
      'add',
      { handle: act, dtype: outDtype, view: { shape: [dims.m, half], strides: [half, 1], offset: 0 } },
      residual,
      [dims.m, half],
      outDtype,
    );
  }
  if (scaling.int4B) {
    // The packed weight dequantized (columns in activation order), then the plain product: the float64 oracle.
    const { int4B, ...rest } = scaling;
    const words = { ...b, view: { shape: [dims.n, dims.k / 8], strides: [b.view.strides[1], 1], offset: b.view.offset } };
    const w = int4DequantValues({ words, scale: int4B.scale, zero: int4B.zero, perm: int4B.perm }, dims.n, dims.k, int4B.groupSize);
    const dense = { handle: w as unknown as Handle, dtype: 'float32' as const, view: { shape: [dims.k, dims.n], strides: [1, dims.k], offset: 0 } };
    return matmulReference(backend, a, dense, dims, outDtype, rest);
  }
  const { m, n, k } = dims;
  const batch = numel(dims.batch);
  const va = values(a);
  const blockScaled = scaling.scaleA?.recipe === 'block' || scaling.scaleB?.recipe === 'block';
  const out =
    batch === 1 && !blockScaled && b.view.shape.length === 2 && b.view.strides[0] === 1 && b.dtype !== 'int64'
      ? productWithRowsOfB(va, b, m, n, k)
      : productOfValues(va, values(b), dims, scaling);
  if (!scaling.scaleA && !scaling.scaleB && !scaling.bias && !scaling.scaleResult && !scaling.residual && !scaling.unary) return store(out, outDtype);
  // The activation sees the float32 value the GPU epilogue holds, as the elementwise op after a float32 matmul would.
  const act = scaling.unary ? UNARY_F64[scaling.unary] : undefined;
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
      v *= result;
      if (act) v = Math.fround(act(Math.fround(v)));
      // The GPU epilogue rounds the product to float32 before adding the residual, as matmul then add would.
      out[i * n + j] = residual ? Math.fround(v) + residual[i * n + j] : v;
    }
  }
  // Scaled FP8 outputs saturate, as the GPU epilogue does.
  return store(out, outDtype, true);
}

/** a [batch, m, k] times b [batch, k, n], both decoded, summing over k in order. */
function productOfValues(va: Float64Array, vb: Float64Array, dims: MatmulDims, scaling: MatmulScaling<Handle>): Float64Array {
  const { m, n, k } = dims;
  const batch = numel(dims.batch);
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
  return out;
}

/**
 * a [m, k] times a b whose k-stride is 1: a weight stored [n, k], read transposed. Each weight row is decoded once
 * into a k-vector and dotted with a's rows, instead of materializing the transposed weight (a 151k-row lm_head per
 * decode step). The sums run over k in the same order as productOfValues, so the results are bit-identical.
 */
function productWithRowsOfB(va: Float64Array, b: Operand<Handle>, m: number, n: number, k: number): Float64Array {
  const table = valueTable(b.dtype);
  const h = b.handle;
  const rowStride = b.view.strides[1];
  const out = new Float64Array(m * n);
  const col = new Float64Array(k);
  for (let j = 0; j < n; j++) {
    const at = b.view.offset + j * rowStride;
    if (table) for (let p = 0; p < k; p++) col[p] = table[h[at + p]];
    else for (let p = 0; p < k; p++) col[p] = h[at + p];
    for (let i = 0; i < m; i++) {
      const ao = i * k;
      let sum = 0;
      for (let p = 0; p < k; p++) sum += va[ao + p] * col[p];
      out[i * n + j] = sum;
    }
  }
  return out;
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
