// CPU reference of the fused attention backward (FlashAttention-2's, recomputing the probabilities row by row):
// float64 loops, the oracle for attention-backward.wgsl. Nothing [heads, Sq, Skv] is built: one row of P at a time,
// recomputed by the forward's own attentionWeights.
import type { StorageArray } from '../../core/codecs.js';
import type { AttentionOptions, Operand } from '../../runtime/backend.js';
import { store, values } from '../../runtime/cpu/cpu-backend.js';
import { attentionWeights } from '../attention/cpu.js';

type Handle = StorageArray;

/**
 * d q, d k, d v (float32, shaped like q, k, v) of o = attention(q, k, v) given dO [Sq, Hq, D]. Per query row i and
 * head h: P_ij = softmax_j(scale q_i.k_j) over the visible keys, dp_ij = dO_i.v_j, D_i = sum_j P_ij dp_ij,
 * ds_ij = P_ij (dp_ij - D_i); dq_i = scale sum_j ds_ij k_j, dk_j += scale ds_ij q_i, dv_j += P_ij dO_i (a kv head
 * sums its group's query heads). A row that sees no key contributes nothing; NaN and Inf follow the arithmetic
 * (a NaN or +Inf score, or all visible scores -Inf, makes the row's P NaN, as the forward's output).
 */
export function attentionBackwardReference(
  q: Operand<Handle>,
  k: Operand<Handle>,
  v: Operand<Handle>,
  dOut: Operand<Handle>,
  options: AttentionOptions,
): [Handle, Handle, Handle] {
  const [sq, hq, d] = q.view.shape;
  const [skv, hkv] = k.view.shape;
  const group = hkv === 0 ? 1 : hq / hkv;
  const qs = values(q);
  const ks = values(k);
  const vs = values(v);
  const gs = values(dOut);
  const dq = new Float64Array(qs.length);
  const dk = new Float64Array(ks.length);
  const dv = new Float64Array(vs.length);
  const p = new Float64Array(skv);
  const dp = new Float64Array(skv);
  for (let i = 0; i < sq; i++) {
    const visible = options.causal ? Math.max(0, Math.min(skv, options.queryOffset + i + 1)) : skv;
    if (visible === 0) continue;
    for (let h = 0; h < hq; h++) {
      const kh = Math.floor(h / group);
      const qBase = (i * hq + h) * d;
      attentionWeights(qs, ks, qBase, kh, hkv, d, visible, options.scale, p);
      let delta = 0;
      for (let j = 0; j < visible; j++) {
        const vBase = (j * hkv + kh) * d;
        let t = 0;
        for (let e = 0; e < d; e++) t += gs[qBase + e] * vs[vBase + e];
        dp[j] = t;
        delta += p[j] * t;
      }
      for (let j = 0; j < visible; j++) {
        const kBase = (j * hkv + kh) * d;
        const ds = p[j] * (dp[j] - delta);
        for (let e = 0; e < d; e++) {
          dq[qBase + e] += options.scale * ds * ks[kBase + e];
          dk[kBase + e] += options.scale * ds * qs[qBase + e];
          dv[kBase + e] += p[j] * gs[qBase + e];
        }
      }
    }
  }
  return [store(dq, 'float32'), store(dk, 'float32'), store(dv, 'float32')];
}
