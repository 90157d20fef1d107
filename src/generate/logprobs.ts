// Log-probabilities of a sampled token and of the most likely alternatives, from the model's raw logits row (before
// temperature, penalties and truncation, as vLLM reports them), in float64 on the host. NaN logits count as -Inf.
export interface TokenLogprob {
  id: number;
  logprob: number;
}

export interface TokenLogprobs {
  /** log p(the sampled token). */
  logprob: number;
  /** The `top` most likely tokens, most likely first. */
  top: TokenLogprob[];
}

export function tokenLogprobs(logits: ArrayLike<number>, id: number, top: number): TokenLogprobs {
  const v = logits.length;
  const at = (i: number) => (Number.isNaN(logits[i]) ? -Infinity : logits[i]!);
  let max = -Infinity;
  for (let i = 0; i < v; i++) max = Math.max(max, at(i));
  let sum = 0;
  if (max !== -Infinity) for (let i = 0; i < v; i++) sum += Math.exp(at(i) - max);
  const logZ = max === Infinity ? Infinity : max + Math.log(sum);
  const lp = (i: number) => (max === -Infinity ? NaN : at(i) - logZ);
  // Top alternatives: a small sorted list (top <= 20), ties to the lower id.
  const best: TokenLogprob[] = [];
  for (let i = 0; i < v && top > 0; i++) {
    const x = at(i);
    if (best.length === top && x <= best[top - 1]!.logprob) continue;
    let j = best.length < top ? best.length : top - 1;
    while (j > 0 && best[j - 1]!.logprob < x) j--;
    best.splice(j, 0, { id: i, logprob: x });
    if (best.length > top) best.pop();
  }
  return { logprob: lp(id), top: best.map((b) => ({ id: b.id, logprob: lp(b.id) })) };
}
