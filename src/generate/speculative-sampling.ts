// Speculative sampling's rule on the host (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative
// Decoding"; Chen et al. 2023): drafted token d_i, drawn from the draft's distribution q_i, is kept with probability
// min(1, p_i(d_i) / q_i(d_i)); at the first rejection the token is drawn from normalize(max(0, p_i - q_i)) instead,
// and when every draft is kept one more comes from p_{k+1}. Each emitted token is then distributed exactly as p:
// the target's distribution after the same temperature / top-k / top-p / min-p as plain sampling (samplingProbs
// follows the sampler's own rules, kernels/sample/cpu.ts). A deterministic draft (n-gram lookup) is a point mass.

/** The sampling settings speculation supports (penalties and grammars fall back to plain decoding). */
export interface ProbsSettings {
  temperature?: number;
  topK?: number;
  topP?: number;
  minP?: number;
}

const f32 = Math.fround;

/**
 * The distribution a sample with these settings draws from, as the sampler builds it: logits / temperature in
 * float32, top-k (ties at the k-th value kept), top-p over what top-k kept, min-p against the top token, then
 * normalized. Temperature 0 is a point mass at the first argmax. NaN logits count as -Inf.
 */
export function samplingProbs(logits: ArrayLike<number>, s: ProbsSettings = {}): Float64Array {
  const n = logits.length;
  const temperature = s.temperature ?? 1;
  const scale = temperature === 0 ? 1 : f32(1 / temperature);
  const x = new Float64Array(n);
  let max = -Infinity;
  let argmax = -1;
  for (let i = 0; i < n; i++) {
    const v = logits[i]!;
    x[i] = Number.isNaN(v) ? -Infinity : f32(v * scale);
    if (x[i] > max) [max, argmax] = [x[i], i];
  }
  const out = new Float64Array(n);
  if (argmax < 0) return out;
  const topK = Math.min(s.topK ?? 0, n);
  if (temperature === 0 || topK === 1) {
    out[argmax] = 1;
    return out;
  }
  const w = x.map((v) => Math.exp(v - max));
  let threshold = -Infinity;
  const topP = s.topP ?? 1;
  if ((topK > 0 && topK < n) || topP < 1) {
    const order = [...x.keys()].filter((i) => x[i] > -Infinity).sort((a, b) => x[b] - x[a]);
    if (topK > 0 && topK < order.length) threshold = x[order[topK - 1]!];
    if (topP < 1) {
      const kept = order.filter((i) => x[i] >= threshold);
      const total = kept.reduce((acc, i) => acc + w[i], 0);
      let cum = 0;
      for (const i of kept) {
        cum += w[i];
        if (cum >= topP * total) {
          threshold = Math.max(threshold, x[i]);
          break;
        }
      }
    }
  }
  const minP = s.minP ?? 0;
  let total = 0;
  for (let i = 0; i < n; i++) {
    if (x[i] > -Infinity && x[i] >= threshold && w[i] >= minP) {
      out[i] = w[i];
      total += w[i];
    }
  }
  for (let i = 0; i < n; i++) out[i] /= total;
  return out;
}

/** Index drawn from probabilities `p` (summing to `total`) by inverse CDF in index order with the uniform u. */
export function drawFrom(p: ArrayLike<number>, u: number, total = 1): number {
  const target = u * total;
  let cum = 0;
  let last = -1;
  for (let i = 0; i < p.length; i++) {
    if (!(p[i]! > 0)) continue;
    last = i;
    cum += p[i]!;
    if (cum > target) return i;
  }
  return last;
}

export interface Verdict {
  /** How many drafted tokens were kept (a prefix). */
  accepted: number;
  /** The token after them: the resample at the first rejection, or a draw from the last row when all were kept. */
  next: number;
}

/**
 * The accept / resample rule over m drafted tokens. `p` holds m + 1 target distributions (row i for the token after
 * i drafts); `q[i]` is the draft's distribution d_i was drawn from, or undefined for a deterministic draft (a point
 * mass at d_i). `uniform` supplies independent draws in [0, 1).
 */
export function acceptOrResample(
  p: readonly Float64Array[],
  q: readonly (Float64Array | undefined)[],
  drafted: readonly number[],
  uniform: () => number,
): Verdict {
  const m = drafted.length;
  if (p.length !== m + 1) throw new RangeError(`acceptOrResample: ${p.length} target rows for ${m} drafted tokens (need ${m + 1})`);
  for (let i = 0; i < m; i++) {
    const d = drafted[i]!;
    const qi = q[i];
    const pd = p[i]![d] ?? 0;
    const qd = qi ? (qi[d] ?? 0) : 1;
    // qd is never 0 for a token drawn from q; a draft that proposes one anyway is simply rejected.
    if (qd > 0 && uniform() * qd < pd) continue;
    const residual = p[i]!.map((pv, t) => Math.max(0, pv - (qi ? (qi[t] ?? 0) : t === d ? 1 : 0)));
    const total = residual.reduce((a, b) => a + b, 0);
    // p == q up to rounding leaves nothing to resample from: p itself is then the right distribution.
    const next = total > 0 ? drawFrom(residual, uniform(), total) : drawFrom(p[i]!, uniform());
    return { accepted: i, next };
  }
  return { accepted: m, next: drawFrom(p[m]!, uniform()) };
}
