// openai/whisper's logit filters (whisper/decoding.py: SuppressBlank, SuppressTokens, ApplyTimestampRules), on one
// sequence's logits on the host: `tokens` is the whole sequence so far (prompt + sot sequence + sampled tokens) and
// `sampleBegin` where the sampled tokens start. Each filter writes -Infinity in place, as the originals do.

export interface TimestampTokens {
  /** <|endoftext|>: ids below it are text. */
  readonly eot: number;
  /** <|notimestamps|>. */
  readonly noTimestamps: number;
  /** <|0.00|>: ids from here on are timestamps. */
  readonly timestampBegin: number;
}

/** SuppressBlank: at the first sampled position, neither ' ' nor <|endoftext|>. */
export function suppressBlank(logits: Float32Array, tokens: readonly number[], sampleBegin: number, blankTokens: readonly number[]): void {
  if (tokens.length === sampleBegin) for (const t of blankTokens) logits[t] = -Infinity;
}

/** SuppressTokens: these ids never. */
export function suppressTokens(logits: Float32Array, ids: readonly number[]): void {
  for (const t of ids) if (t < logits.length) logits[t] = -Infinity;
}

function logSumExp(x: Float32Array, from: number, to: number): number {
  let m = -Infinity;
  for (let i = from; i < to; i++) if (x[i] > m) m = x[i];
  if (m === -Infinity) return -Infinity;
  let s = 0;
  for (let i = from; i < to; i++) s += Math.exp(x[i] - m);
  return m + Math.log(s);
}

/** log_softmax of a row, in float64. */
export function logSoftmax(logits: Float32Array): Float64Array {
  const lse = logSumExp(logits, 0, logits.length);
  const out = new Float64Array(logits.length);
  for (let i = 0; i < logits.length; i++) out[i] = logits[i] - lse;
  return out;
}

/**
 * ApplyTimestampRules: <|notimestamps|> never; timestamps come in pairs (after one timestamp that follows text only
 * another timestamp or <|endoftext|>; after a pair, text); timestamps never decrease and a segment has a nonzero
 * length; the first sampled token is a timestamp no later than maxInitialTimestampIndex; and when the timestamps'
 * total probability beats every single text token, a timestamp it is.
 */
export function applyTimestampRules(
  logits: Float32Array,
  tokens: readonly number[],
  sampleBegin: number,
  t: TimestampTokens,
  maxInitialTimestampIndex: number | undefined,
): void {
  const tb = t.timestampBegin;
  const n = logits.length;
  logits[t.noTimestamps] = -Infinity;
  const seq = tokens.slice(sampleBegin);
  const lastWasTimestamp = seq.length >= 1 && seq[seq.length - 1] >= tb;
  const penultimateWasTimestamp = seq.length < 2 || seq[seq.length - 2] >= tb;
  if (lastWasTimestamp) {
    if (penultimateWasTimestamp) logits.fill(-Infinity, tb, n);
    else logits.fill(-Infinity, 0, t.eot);
  }
  const timestamps = seq.filter((x) => x >= tb);
  if (timestamps.length > 0) {
    // forbid timestamps smaller than the last, and (unless closing a pair) equal to it: no zero-length segment
    const last = timestamps[timestamps.length - 1];
    const timestampLast = lastWasTimestamp && !penultimateWasTimestamp ? last : last + 1;
    logits.fill(-Infinity, tb, Math.min(timestampLast, n));
  }
  if (tokens.length === sampleBegin) {
    logits.fill(-Infinity, 0, tb);
    if (maxInitialTimestampIndex !== undefined) logits.fill(-Infinity, Math.min(tb + maxInitialTimestampIndex + 1, n), n);
  }
  // the log-softmax of the filtered logits: the timestamps' total against the best text token
  const lse = logSumExp(logits, 0, n);
  const timestampLogprob = logSumExp(logits, tb, n) - lse;
  let maxText = -Infinity;
  for (let i = 0; i < tb; i++) if (logits[i] > maxText) maxText = logits[i];
  if (timestampLogprob > maxText - lse) logits.fill(-Infinity, 0, tb);
}
