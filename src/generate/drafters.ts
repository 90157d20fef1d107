// What proposes tokens for speculative decoding (generate/speculative.ts verifies them): n-gram prompt lookup
// (vLLM's ngram proposer, transformers' prompt_lookup_decoding) and a draft model sharing the target's vocabulary;
// the target's own MTP layer is mtp-drafter.ts.
// A drafter sees the whole history each round, and hears back how many of its tokens were kept, so it can roll its
// own state back.
import { keep, tidy } from '../core/scope.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from '../ops/creation.js';
import { sampleToken } from '../ops/sample.js';
import { cat, copyInto, clone } from '../ops/shape-ops.js';
import type { CausalLM, ModelCache } from '../models/causal-lm.js';
import { drawFrom, samplingProbs, type ProbsSettings } from './speculative-sampling.js';
import { TensorGpuError } from '../core/errors.js';

/** Speculative decoding that cannot run as asked (an unsupported kind, a draft with another vocabulary). */
export class SpeculativeError extends TensorGpuError {}

export interface Draft {
  tokens: number[];
  /** The distribution each token was drawn from (sampled drafts of a model); absent: each is a point mass. */
  probs?: Float64Array[];
}

export interface Drafter {
  readonly name: string;
  /** Up to k tokens to follow `history` (prompt and output so far; its last token is not yet verified past). */
  propose(history: readonly number[], k: number): Promise<Draft>;
  /** The target kept `accepted` of the last proposal's tokens. */
  accepted(accepted: number): void;
  /**
   * The target's forward (its logits, as CausalLM.forward's), for a drafter that reads what the forward computes
   * besides the logits (the MTP drafter keeps the hidden states); absent: the session runs model.forward.
   */
  forwardTarget?(tokens: Tensor, cache: ModelCache, options: { lastOnly?: boolean }): Promise<Tensor>;
  dispose(): void;
}

export interface NgramOptions {
  /** Longest suffix to match (default 3); shorter ones down to `minN` are tried when it finds nothing. */
  n?: number;
  /** Shortest suffix to match (default 1). */
  minN?: number;
}

/**
 * Prompt lookup: find the last n tokens earlier in the history (the latest earlier occurrence, longest n first) and
 * propose the k tokens that followed it. Costs nothing to run; pays on text that repeats its context (code edits,
 * quoting, summaries).
 */
export class NgramDrafter implements Drafter {
  readonly name = 'ngram';
  private readonly maxN: number;
  private readonly minN: number;

  constructor(options: NgramOptions = {}) {
    this.maxN = options.n ?? 3;
    this.minN = Math.min(options.minN ?? 1, this.maxN);
    if (!Number.isInteger(this.maxN) || this.maxN < 1 || !Number.isInteger(this.minN) || this.minN < 1)
      throw new RangeError(`ngram speculation: n must be a positive integer, got n=${this.maxN}, minN=${this.minN}`);
  }

  async propose(history: readonly number[], k: number): Promise<Draft> {
    return { tokens: ngramLookup(history, k, this.maxN, this.minN) };
  }

  accepted(): void {}

  dispose(): void {}
}

/** The tokens following the latest earlier occurrence of the history's last n tokens (n from maxN down to minN). */
export function ngramLookup(history: readonly number[], k: number, maxN: number, minN = 1): number[] {
  const len = history.length;
  for (let n = Math.min(maxN, len - 1); n >= minN; n--) {
    for (let start = len - n - 1; start >= 0; start--) {
      let match = true;
      for (let j = 0; j < n && match; j++) match = history[start + j] === history[len - n + j];
      if (!match) continue;
      const from = start + n;
      return history.slice(from, Math.min(from + k, len));
    }
  }
  return [];
}

/**
 * A draft model (the same tokenizer, a smaller model; any family): its own cache holds the history it has seen.
 * Each round feeds what it has not seen (one forward), then drafts one token per forward. A rejection rolls its
 * cache back: KV rows by length; a hybrid draft (conv / recurrent state) restores the state saved after the round's
 * first forward and re-feeds the kept tokens in the next round's first forward.
 */
export class ModelDrafter implements Drafter {
  readonly name = 'draft';
  private readonly cache: ModelCache;
  /** History tokens (a prefix) the cache holds. */
  private fed = 0;
  private readonly state: Tensor[];
  private readonly saved: Tensor[];
  /** The last round's cache length after its first forward, and the tokens it drafted. */
  private round: { base: number; drafted: number } | undefined;

  constructor(
    readonly model: CausalLM,
    private readonly settings: ProbsSettings,
    private readonly uniform: () => number,
  ) {
    this.cache = model.newCache();
    this.state = this.cache.stateTensors?.() ?? [];
    this.saved = this.state.map((t) => keep(clone(t)));
  }

  private get greedy(): boolean {
    return (this.settings.temperature ?? 1) === 0;
  }

  async propose(history: readonly number[], k: number): Promise<Draft> {
    this.round = undefined;
    const unseen = history.slice(this.fed);
    // The round feeds the unseen tokens, then k - 1 drafts.
    const room = this.cache.capacity - this.cache.length - unseen.length - (k - 1);
    if (k > 0 && room < 0) k += room;
    if (k <= 0 || unseen.length === 0) return { tokens: [] };
    const probs: Float64Array[] = [];
    const tokens: number[] = [];
    const chained: Tensor[] = [];
    // Every input made here (tiny int32 tensors), freed at the end.
    const inputs: Tensor[] = [tensor(unseen, { dtype: 'int32', device: this.model.device })];
    try {
      for (let i = 0; i < k; i++) {
        const logits = await this.model.forward(inputs[inputs.length - 1]!, this.cache);
        if (i === 0) {
          this.fed = history.length;
          this.round = { base: this.cache.length, drafted: k };
          tidy(() => this.state.forEach((t, j) => copyInto(this.saved[j]!, t)));
        }
        if (this.greedy) {
          // Greedy drafts stay on the device, each the next forward's input: one read for the k ids.
          const id = sampleToken(logits, { temperature: 0 });
          logits.dispose();
          chained.push(id);
          inputs.push(id);
        } else {
          const row = (await logits.toArray()) as Float32Array;
          logits.dispose();
          const q = samplingProbs(row, this.settings);
          const d = drawFrom(q, this.uniform());
          probs.push(q);
          tokens.push(d);
          inputs.push(tensor([d], { dtype: 'int32', device: this.model.device }));
        }
      }
      if (this.greedy) {
        const all = tidy(() => cat(chained, 0));
        tokens.push(...(await all.toArray()));
        all.dispose();
      }
    } finally {
      for (const t of inputs) t.dispose();
    }
    return this.greedy ? { tokens } : { tokens, probs };
  }

  accepted(accepted: number): void {
    const r = this.round;
    if (!r) return;
    this.round = undefined;
    // The cache holds the round's base history then drafts 1..k-1.
    const kept = Math.min(accepted, r.drafted - 1);
    if (kept === r.drafted - 1 || this.state.length === 0) {
      this.cache.length = r.base + kept;
      this.fed = r.base + kept;
    } else {
      tidy(() => this.state.forEach((t, j) => copyInto(t, this.saved[j]!)));
      this.cache.length = r.base;
      this.fed = r.base;
    }
  }

  dispose(): void {
    this.cache.dispose();
    for (const t of this.saved) t.dispose();
  }
}
