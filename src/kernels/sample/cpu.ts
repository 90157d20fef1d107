// The reference sampler: the same rules as the GPU kernel (sample.wgsl) in float64, over float32 logits.
// Ties at the top-k / top-p threshold are all kept; NaN logits count as -Inf; the draw is inverse-CDF in index
// order with the caller's uniform u, so CPU and GPU pick the same token except where float rounding moves a
// boundary. A grammar's token bitmask (bit i % 32 of word i / 32 set: token i allowed) turns every other token's
// logit into -Inf after the penalties, and -Inf tokens are never kept, as on the GPU.
import type { SamplingParams } from '../../runtime/backend.js';

const f32 = Math.fround;

/** Whether token i is allowed by a bitmask (32 tokens per word, low bit first). */
export const maskAllows = (mask: ArrayLike<number>, i: number): boolean => ((mask[i >>> 5]! >>> (i & 31)) & 1) === 1;

/** Penalised, tempered logits (float32 arithmetic, as on the GPU); tokens a mask disallows are -Inf. */
export function processLogits(logits: Float64Array, previous: readonly number[], s: SamplingParams, mask?: ArrayLike<number>): Float64Array {
  const greedy = s.invTemperature === 0;
  const scale = greedy ? 1 : s.invTemperature;
  const out = logits.map((x) => (Number.isNaN(x) ? -Infinity : f32(x * scale)));
  const counts = new Map<number, number>();
  for (const id of previous) counts.set(id, (counts.get(id) ?? 0) + 1);
  for (const [id, count] of counts) {
    if (id < 0 || id >= logits.length || Number.isNaN(logits[id])) continue;
    const raw = logits[id];
    let x = raw > 0 ? f32(raw * s.invRepetition) : f32(raw * s.repetition);
    x = f32(f32(x - s.presence) - f32(s.frequency * count));
    out[id] = f32(x * scale);
  }
  if (mask) for (let i = 0; i < out.length; i++) if (!maskAllows(mask, i)) out[i] = -Infinity;
  return out;
}

/** The token id for these logits and parameters, or -1 when every logit is -Inf/NaN. */
export function sampleReference(logits: Float64Array, previous: readonly number[], s: SamplingParams, mask?: ArrayLike<number>): number {
  const x = processLogits(logits, previous, s, mask);
  let max = -Infinity;
  let argmax = -1;
  x.forEach((v, i) => {
    if (v > max) [max, argmax] = [v, i];
  });
  if (argmax < 0) return -1;
  if (s.invTemperature === 0 || s.topK === 1) return argmax;
  const w = x.map((v) => Math.exp(v - max));
  let threshold = -Infinity;
  if (s.topK > 0 && s.topK < x.length) threshold = [...x].sort((a, b) => b - a)[s.topK - 1];
  if (s.topP < 1) {
    const kept = [...x.keys()].filter((i) => x[i] >= threshold).sort((a, b) => x[b] - x[a]);
    const total = kept.reduce((acc, i) => acc + w[i], 0);
    let cum = 0;
    for (const i of kept) {
      cum += w[i];
      if (cum >= s.topP * total) {
        threshold = Math.max(threshold, x[i]);
        break;
      }
    }
  }
  const keep = (i: number) => x[i] > -Infinity && x[i] >= threshold && w[i] >= s.minP;
  let total = 0;
  for (let i = 0; i < x.length; i++) if (keep(i)) total += w[i];
  const target = s.u * total;
  let cum = 0;
  let last = -1;
  for (let i = 0; i < x.length; i++) {
    if (!keep(i)) continue;
    last = i;
    cum += w[i];
    if (cum > target) return i;
  }
  return last;
}
