// CPU references of the MoE routing and expert-indexed linear layer: the oracle for the fused WGSL kernels.
import type { ExpertLinearOptions, Operand, RouteOptions } from '../../runtime/backend.js';
import { decodeOne, type StorageArray } from '../../core/codecs.js';
import type { DType } from '../../core/dtype.js';
import { ShapeError } from '../../core/errors.js';
import { store, values } from '../../runtime/cpu/cpu-backend.js';

type Handle = StorageArray;

/**
 * Router top-k of logits [T, E]. Softmax scoring: each row's softmax in float64, every probability rounded to
 * float32 (what a float32 softmax gives, correctly rounded). Sigmoid scoring: each score is the float32-rounded
 * 1 / (1 + e^-x). The topK largest of score + selectionBias (in float32) are chosen, descending, ties to the lower
 * expert id; their weights are the unbiased scores. A NaN logit (and, for softmax, a +Inf logit or a row of all
 * -Inf, which have no softmax) makes the row undefined: it picks experts 0..topK-1 with NaN weights, as the WebGPU
 * kernel does. With normalize the chosen weights are divided by their float32 sum + normalizeEps; then times scale.
 * With sharedExpert the logits are [T, E+1]: the above sees the first E, and each row gets a last slot, id E with
 * weight sigmoid(logit E) rounded to float32 (neither normalized nor scaled; NaN only when that logit is NaN).
 */
export function moeRouteReference(logits: Operand<Handle>, topK: number, options: RouteOptions<Handle>): [Handle, Handle] {
  const [t, columns] = logits.view.shape;
  const shared = options.sharedExpert ? 1 : 0;
  const e = columns - shared;
  const slots = topK + shared; // the output row stride
  const v = values(logits);
  const bias = options.selectionBias ? values(options.selectionBias) : undefined;
  const ids = new Int32Array(t * slots);
  const weights = new Float32Array(t * slots);
  const prob = new Float64Array(e);
  const key = new Float64Array(e);
  const order = new Int32Array(e);
  for (let row = 0; row < t; row++) {
    const base = row * columns;
    const out = row * slots;
    if (shared) {
      ids[out + topK] = e;
      weights[out + topK] = 1 / (1 + Math.exp(-v[base + e]));
    }
    let max = -Infinity;
    let nan = false;
    for (let i = 0; i < e; i++) {
      const x = v[base + i];
      if (Number.isNaN(x)) nan = true;
      else if (x > max) max = x;
    }
    // exp(x - max) with max = +Inf or -Inf (every logit -Inf) is NaN: the whole row is undefined.
    if (nan || (options.scoring === 'softmax' && !Number.isFinite(max))) {
      for (let j = 0; j < topK; j++) {
        ids[out + j] = j;
        weights[out + j] = NaN;
      }
      continue;
    }
    if (options.scoring === 'softmax') {
      let sum = 0;
      for (let i = 0; i < e; i++) {
        prob[i] = Math.exp(v[base + i] - max);
        sum += prob[i];
      }
      for (let i = 0; i < e; i++) prob[i] = Math.fround(prob[i] / sum);
    } else {
      for (let i = 0; i < e; i++) prob[i] = Math.fround(1 / (1 + Math.exp(-v[base + i])));
    }
    for (let i = 0; i < e; i++) {
      key[i] = bias ? Math.fround(prob[i] + bias[i]) : prob[i];
      order[i] = i;
    }
    // Partial selection: topK passes of "largest remaining, lowest id first" (topK <= E, and E is small).
    for (let j = 0; j < topK; j++) {
      let best = j;
      for (let i = j + 1; i < e; i++) {
        const a = key[order[i]];
        const b = key[order[best]];
        if (a > b || (a === b && order[i] < order[best])) best = i;
      }
      const tmp = order[j];
      order[j] = order[best];
      order[best] = tmp;
    }
    let chosenSum = 0;
    for (let j = 0; j < topK; j++) chosenSum = Math.fround(chosenSum + prob[order[j]]);
    const denominator = Math.fround(chosenSum + options.normalizeEps);
    for (let j = 0; j < topK; j++) {
      const p = prob[order[j]];
      ids[out + j] = order[j];
      const w = options.normalize ? Math.fround(p / denominator) : p;
      weights[out + j] = options.scale === 1 ? w : Math.fround(w * options.scale);
    }
  }
  return [ids, weights];
}

const decodeTables = new Map<DType, Float64Array>();

/** Storage code -> value for 16-bit and FP8 dtypes, built once (65,536 or 256 entries). */
function decodeTable(dtype: DType): Float64Array | undefined {
  if (dtype === 'float32') return undefined;
  let table = decodeTables.get(dtype);
  if (!table) {
    table = new Float64Array(dtype === 'float16' || dtype === 'bfloat16' ? 65536 : 256);
    for (let c = 0; c < table.length; c++) table[c] = decodeOne(dtype, c);
    decodeTables.set(dtype, table);
  }
  return table;
}

/**
 * out[t*k + j] = x_row(t, j) . W[ids[t, j]]^T, or with combine out[t] = sum_j combine[t, j] * (that dot), in float64
 * then rounded once to outDtype. Only the chosen experts are decoded (one at a time, shared by every slot that chose
 * it): a stacked MoE weight is far too large to turn into float64 whole. An FP8 weight is dequantized as
 * code value * scale[e, n / 128, k / 128], a packed 4-bit one (options.int4) by its group's scale and zero point
 * (int4.transposed: x [.., N] times the stack's transpose, out [.., K] in stored column order). An expert id
 * outside 0..E-1 throws a ShapeError.
 */
export function expertLinearReference(x: Operand<Handle>, weight: Operand<Handle>, ids: Operand<Handle>, options: ExpertLinearOptions<Handle>): Handle {
  const q = options.int4;
  const [numExperts, n, kStored] = weight.view.shape;
  // Packed 4-bit: eight columns a word.
  const kDim = q ? kStored * 8 : kStored;
  const [t, slots] = ids.view.shape;
  const xv = values(x);
  // With k = 1 both layouts are the same rows.
  const perSlot = x.view.shape[0] === t * slots;
  const idv = values(ids);
  const combine = options.combine ? values(options.combine) : undefined;
  const scale = options.scale;
  const nb = Math.ceil(n / 128);
  const kb = Math.ceil(kDim / 128);

  const bad = idv.find((e) => e < 0 || e >= numExperts);
  if (bad !== undefined) throw new ShapeError(`expertLinear: expert id ${bad} is out of range for ${numExperts} experts`);

  const slotsOf = new Map<number, number[]>();
  for (let s = 0; s < idv.length; s++) {
    const list = slotsOf.get(idv[s]);
    if (list) list.push(s);
    else slotsOf.set(idv[s], [s]);
  }

  const table = q ? undefined : decodeTable(weight.dtype);
  const { offset, strides } = weight.view;
  const w = new Float64Array(n * kDim);
  // The product's width and length: the stack's N and K, or for the transpose of a packed stack K and N.
  const transposed = !!q?.transposed;
  const [width, length] = transposed ? [kDim, n] : [n, kDim];
  const wt = transposed ? new Float64Array(n * kDim) : w;
  const out = new Float64Array((combine ? t : t * slots) * width);
  const int4 = q && { scale: values(q.scale), zero: values(q.zero), perm: q.perm && values(q.perm), groups: kDim / q.groupSize };
  for (const [e, list] of slotsOf) {
    if (q && int4) {
      // w[n, perm[j]] = (code - zero) * scale of column j's group (formats/int4.ts).
      for (let row = 0; row < n; row++) {
        const g0 = (e * n + row) * int4.groups;
        for (let j = 0; j < kDim; j++) {
          const word = weight.handle[offset + e * strides[0] + row * strides[1] + (j >> 3) * strides[2]];
          const g = g0 + Math.floor(j / q.groupSize);
          w[row * kDim + (int4.perm && !transposed ? int4.perm[j] : j)] = (((word >>> (4 * (j & 7))) & 15) - int4.zero[g]) * int4.scale[g];
        }
      }
      if (transposed) for (let row = 0; row < n; row++) for (let j = 0; j < kDim; j++) wt[j * n + row] = w[row * kDim + j];
    }
    for (let row = 0; row < (q ? 0 : n); row++) {
      for (let p = 0; p < kDim; p++) {
        const code = weight.handle[offset + e * strides[0] + row * strides[1] + p * strides[2]];
        let value = table ? table[code] : code;
        if (scale)
          value *= options.scaleTransposed
            ? scale[(e * kb + Math.floor(p / 128)) * nb + Math.floor(row / 128)]
            : scale[(e * nb + Math.floor(row / 128)) * kb + Math.floor(p / 128)];
        w[row * kDim + p] = value;
      }
    }
    for (const s of list) {
      const xBase = (perSlot ? s : Math.floor(s / slots)) * length;
      const outBase = (combine ? Math.floor(s / slots) : s) * width;
      const c = combine ? combine[s] : 1;
      for (let row = 0; row < width; row++) {
        let dot = 0;
        const wBase = row * length;
        for (let p = 0; p < length; p++) dot += xv[xBase + p] * wt[wBase + p];
        out[outBase + row] += c * dot;
      }
    }
  }
  return store(out, options.outDtype);
}

/**
 * SwiGLU's backward at its gate|up input x [..., 2I] for the output's gradient g [..., I], in float64, stored as
 * float32: the gate half g b silu'(a), the up half g silu(a).
 */
export function swigluBackwardReference(x: Operand<Handle>, g: Operand<Handle>): Handle {
  const two = x.view.shape[x.view.shape.length - 1];
  const half = two / 2;
  const xs = values(x);
  const gs = values(g);
  const rows = two === 0 ? 0 : xs.length / two;
  const out = new Float64Array(rows * two);
  for (let r = 0; r < rows; r++) {
    for (let i = 0; i < half; i++) {
      const a = xs[r * two + i];
      const b = xs[r * two + half + i];
      const gi = gs[r * half + i];
      const s = 1 / (1 + Math.exp(-a));
      out[r * two + i] = gi * b * s * (1 + a * (1 - s));
      out[r * two + half + i] = gi * a * s;
    }
  }
  return store(out, 'float32');
}

/**
 * The gradient of a stacked expert weight [E, N, K] for each term: grad[e] = sum over the slots s with ids[s] = e of
 * combine[s] * g_row(s)^T outer x_row(s), g [T or T*k, N], x [T or T*k, K] (a row per token or per slot), in
 * float64, stored as float32 [E, N, K]. An expert no slot chose gets zeros; an id outside 0..E-1 throws.
 */
export function expertWeightGradReference(
  ids: Operand<Handle>,
  experts: number,
  terms: readonly { g: Operand<Handle>; x: Operand<Handle> }[],
  combine: Operand<Handle> | undefined,
): Handle[] {
  const [t, slots] = ids.view.shape;
  const idv = values(ids);
  const bad = idv.find((e) => e < 0 || e >= experts);
  if (bad !== undefined) throw new ShapeError(`expertWeightGrad: expert id ${bad} is out of range for ${experts} experts`);
  const cw = combine ? values(combine) : undefined;
  return terms.map(({ g, x }) => {
    const n = g.view.shape[1];
    const k = x.view.shape[1];
    const gv = values(g);
    const xv = values(x);
    const gPerSlot = g.view.shape[0] === t * slots;
    const xPerSlot = x.view.shape[0] === t * slots;
    const out = new Float64Array(experts * n * k);
    for (let s = 0; s < idv.length; s++) {
      const token = Math.floor(s / slots);
      const gBase = (gPerSlot ? s : token) * n;
      const xBase = (xPerSlot ? s : token) * k;
      const c = cw ? cw[s] : 1;
      const base = idv[s] * n * k;
      for (let row = 0; row < n; row++) {
        const a = c * gv[gBase + row];
        const o = base + row * k;
        for (let col = 0; col < k; col++) out[o + col] += a * xv[xBase + col];
      }
    }
    return store(out, 'float32');
  });
}
