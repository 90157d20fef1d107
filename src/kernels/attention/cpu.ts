// The float64 reference of attention (attentionWeights is shared with the backward's): the oracle its WebGPU
// kernels are tested against.
import type { AttentionOptions, Operand } from '../../runtime/backend.js';
import type { StorageArray } from '../../core/codecs.js';
import { store, values } from '../../runtime/cpu/cpu-backend.js';
import { decodeKvRow, isScaledKv } from '../../core/kv-fp8.js';

type Handle = StorageArray;

/**
 * Row (query qBase, kv head kh) of softmax(scale q.k) over the first `visible` keys, into p: float64, a NaN score
 * reaching every weight of its row (the forward's output, and the backward's recomputed probabilities).
 */
export function attentionWeights(
  qs: Float64Array,
  ks: Float64Array,
  qBase: number,
  kh: number,
  hkv: number,
  d: number,
  visible: number,
  scale: number,
  p: Float64Array,
): void {
  let max = -Infinity;
  for (let j = 0; j < visible; j++) {
    const kBase = (j * hkv + kh) * d;
    let dot = 0;
    for (let e = 0; e < d; e++) dot += qs[qBase + e] * ks[kBase + e];
    p[j] = scale * dot;
    // NaN scores must reach the output, so they win over max here rather than being skipped by `>`.
    if (!(p[j] <= max)) max = Number.isNaN(max) ? max : p[j];
  }
  let sum = 0;
  for (let j = 0; j < visible; j++) {
    p[j] = Math.exp(p[j] - max);
    sum += p[j];
  }
  for (let j = 0; j < visible; j++) p[j] /= sum;
}

/**
 * An FP8 KV cache's scaled rows [Skv, Hkv, kvRowWidth(d)] (core/kv-fp8.ts) as float32 [Skv, Hkv, d]: each value
 * code * scale, exact. Other dtypes pass through.
 */
export function dequantizedKv(kv: Operand<Handle>, d: number): Operand<Handle> {
  if (!isScaledKv(kv.dtype)) return kv;
  const [rows, h] = kv.view.shape;
  const [s0, s1] = kv.view.strides;
  const out = new Float32Array(rows * h * d);
  for (let j = 0; j < rows; j++) {
    for (let a = 0; a < h; a++) decodeKvRow(kv.handle, d, kv.view.offset + j * s0 + a * s1, out, (j * h + a) * d);
  }
  return { handle: out, dtype: 'float32', view: { shape: [rows, h, d], strides: [h * d, d, 1], offset: 0 } };
}

/** gate [Sq, Hq, D] (any strides), when given, multiplies the float64 result by sigmoid(gate) before the one rounding. */
export function attentionReference(q: Operand<Handle>, k: Operand<Handle>, v: Operand<Handle>, options: AttentionOptions, gate?: Operand<Handle>): Handle {
  const [sq, hq, d] = q.view.shape;
  const [skv, hkv] = k.view.shape;
  const group = hkv === 0 ? 1 : hq / hkv;
  const qs = values(q);
  const ks = values(dequantizedKv(k, d));
  const vs = values(dequantizedKv(v, d));
  const out = new Float64Array(qs.length);
  const p = new Float64Array(skv);
  for (let i = 0; i < sq; i++) {
    const visible = options.causal ? Math.max(0, Math.min(skv, options.queryOffset + i + 1)) : skv;
    if (visible === 0) continue; // zeros
    for (let h = 0; h < hq; h++) {
      const kh = Math.floor(h / group);
      const qBase = (i * hq + h) * d;
      attentionWeights(qs, ks, qBase, kh, hkv, d, visible, options.scale, p);
      for (let j = 0; j < visible; j++) {
        const vBase = (j * hkv + kh) * d;
        for (let e = 0; e < d; e++) out[qBase + e] += p[j] * vs[vBase + e];
      }
    }
  }
  if (gate) {
    // Every element, rows that saw no key too: 0 * sigmoid(NaN) is NaN, as torch's attn * sigmoid(gate).
    const g = values(gate);
    for (let e = 0; e < out.length; e++) out[e] *= 1 / (1 + Math.exp(-g[e]));
  }
  return store(out, q.dtype);
}
