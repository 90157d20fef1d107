// Speculative decoding: a drafter (generate/drafters.ts) proposes k tokens, and the target checks them all in one
// forward of k + 1 positions ([last, d1..dk], every position's logits). Greedy keeps the longest prefix where the
// target's argmax agrees, then takes the target's own token: the output is plain greedy's. Sampling keeps the
// target's distribution by the accept / resample rule (generate/speculative-sampling.ts). Each verification emits
// between 1 and k + 1 tokens.
//
// Rolling back the rejected tokens: KV rows need only the cache length set back (a later forward overwrites rows
// past it, and attention reads rows below it). Conv and recurrent states (LFM2, Qwen3.5 / Qwen3.6) are overwritten
// in place, so they are copied before a verification that drafts anything; on a partial acceptance the copy is
// restored, the length set back to the verification's start, and the kept tokens are fed again at the front of the
// next verification's forward (no extra forward). The draft model's cache rolls back the same way; the MTP drafter
// (mtp-drafter.ts) runs the target's forwards itself to keep their hidden states, and refeeds its rows each round.
import { keep, tidy } from '../core/scope.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from '../ops/creation.js';
import { sampleRows, sampleToken } from '../ops/sample.js';
import { clone, copyInto, narrow } from '../ops/shape-ops.js';
import type { CausalLM, ModelCache } from '../models/causal-lm.js';
import { defaultGenerator, Generator } from '../core/random.js';
import type { TextTokenizer } from '../tokenizer/tokenizer.js';
import { ModelDrafter, NgramDrafter, SpeculativeError, type Drafter } from './drafters.js';
import { mtpDrafter } from './mtp-drafter.js';

export type { Draft, Drafter } from './drafters.js';
export { SpeculativeError } from './drafters.js';
import { acceptOrResample, drawFrom, samplingProbs, type ProbsSettings } from './speculative-sampling.js';
import { SequenceOutput } from './sequence-output.js';
import type { GeneratedToken, GenerateOptions, GenerationStats } from './generate.js';

/** What drafts the tokens: a smaller model with the same vocabulary, n-gram prompt lookup, or Qwen3.6's MTP layer. */
export type SpeculativeConfig =
  | { kind: 'draft'; model: CausalLM }
  | { kind: 'ngram' /** Longest suffix matched (default 3). */; n?: number /** Shortest (default 1). */; minN?: number }
  | { kind: 'mtp' }
  /** A drafter of the caller's own (it must propose ids below the target's vocabulary size). */
  | { kind: 'custom'; drafter: Drafter };

/** Drafted tokens per verification when numSpeculativeTokens is unset. */
export const DEFAULT_SPECULATIVE_TOKENS = 4;

export interface SpeculativeStats {
  kind: SpeculativeConfig['kind'];
  /** k: the most tokens drafted per verification. */
  numSpeculativeTokens: number;
  /** Target forwards after the prefill (each verifies up to k drafts). */
  targetForwards: number;
  draftedTokens: number;
  acceptedTokens: number;
  /** acceptedTokens / draftedTokens (0 with nothing drafted). */
  acceptanceRate: number;
  /** Tokens emitted per target forward after the prefill (1 for plain decoding, up to k + 1). */
  tokensPerTargetForward: number;
  /** Wall time drafting (the draft model's forwards and reads; ~0 for n-gram lookup). */
  draftMs: number;
  /** Wall time verifying: the target's forwards of k + 1 positions, the verdict's read and the rollback. */
  verifyMs: number;
  /** Set when speculation did not run and decoding was plain: why. */
  fallback?: string;
}

/** Why these options decode plainly even with `speculative` set (undefined: speculation runs). */
export function speculationBlocker(options: GenerateOptions): string | undefined {
  if ((options.repetitionPenalty ?? 1) !== 1 || (options.presencePenalty ?? 0) !== 0 || (options.frequencyPenalty ?? 0) !== 0)
    return 'repetition / presence / frequency penalties are not supported with speculation';
  if (options.responseFormat) return 'a response format (constrained decoding) is not supported with speculation';
  if (options.logprobs !== undefined) return 'log-probabilities are not supported with speculation';
  return undefined;
}

/** The drafter for a config, checked against the target. */
export function makeDrafter(target: CausalLM, config: SpeculativeConfig, settings: ProbsSettings, uniform: () => number): Drafter {
  if (config.kind === 'ngram') return new NgramDrafter({ n: config.n, minN: config.minN });
  if (config.kind === 'custom') return config.drafter;
  if (config.kind === 'mtp') return mtpDrafter(target, settings, uniform);
  const draft = config.model;
  if (draft.config.vocabSize !== target.config.vocabSize)
    throw new SpeculativeError(
      `the draft model's vocabulary has ${draft.config.vocabSize} tokens and the target's ${target.config.vocabSize}: a draft must share the target's tokenizer`,
    );
  if (draft.device !== target.device) throw new SpeculativeError(`the draft model is on ${draft.device} and the target on ${target.device}`);
  return new ModelDrafter(draft, settings, uniform);
}

export interface VerifiedStep {
  /** The kept drafts and the target's next token (1..k + 1 tokens). */
  tokens: number[];
  drafted: number;
  accepted: number;
  draftMs: number;
  verifyMs: number;
}

/** The target's side: its cache, prefill, and verification with rollback. */
export class SpeculativeSession {
  readonly cache: ModelCache;
  private readonly state: Tensor[];
  private readonly saved: Tensor[];
  /** Kept tokens a rollback left out of the cache: fed again at the front of the next verification. */
  private pending: number[] = [];
  private readonly greedy: boolean;

  constructor(
    readonly model: CausalLM,
    readonly drafter: Drafter,
    private readonly options: { k: number; settings: ProbsSettings; uniform: () => number; compilePrefill?: boolean },
  ) {
    if (!Number.isInteger(options.k) || options.k < 1) throw new RangeError(`numSpeculativeTokens must be a positive integer, got ${options.k}`);
    this.cache = model.newCache();
    this.state = this.cache.stateTensors?.() ?? [];
    this.saved = this.state.map((t) => keep(clone(t)));
    this.greedy = (options.settings.temperature ?? 1) === 0;
  }

  /** Runs the prompt and returns the first token. */
  async prefill(ids: readonly number[]): Promise<number> {
    const input = tensor([...ids], { dtype: 'int32', device: this.model.device });
    try {
      const logits = await this.forward(input, true);
      return (await this.pick(logits, 1))[0]!.next;
    } finally {
      input.dispose();
    }
  }

  /** The target's forward at the cache's rows: the drafter's own when it has one (the MTP drafter keeps hidden states). */
  private forward(ids: Tensor, lastOnly: boolean): Promise<Tensor> {
    if (this.drafter.forwardTarget) return this.drafter.forwardTarget(ids, this.cache, { lastOnly });
    return this.model.forward(ids, this.cache, { lastOnly, compile: lastOnly ? this.options.compilePrefill : undefined });
  }

  /** Whether the cache has room for one more verification (of at least the last token). */
  get hasRoom(): boolean {
    return this.cache.length + this.pending.length + 1 <= this.cache.capacity;
  }

  /**
   * One verification after `history` (prompt and output; its last token is the last emitted one, not yet in the
   * cache), drafting at most `limit - 1` tokens so at most `limit` come back.
   */
  async step(history: readonly number[], limit: number): Promise<VerifiedStep> {
    const last = history[history.length - 1]!;
    const room = this.cache.capacity - this.cache.length - this.pending.length - 1;
    const k = Math.max(0, Math.min(this.options.k, room, limit - 1));
    const t0 = performance.now();
    const draft = k > 0 ? await this.drafter.propose(history, k) : { tokens: [] };
    const t1 = performance.now();
    const drafted = draft.tokens.slice(0, k);
    const m = drafted.length;
    const input = [...this.pending, last, ...drafted];
    const start = this.cache.length;
    if (m > 0) tidy(() => this.state.forEach((t, j) => copyInto(this.saved[j]!, t)));
    const ids = tensor(input, { dtype: 'int32', device: this.model.device });
    let verdict: { accepted: number; next: number };
    try {
      const logits = await this.forward(ids, false);
      const rows = tidy(() => narrow(logits, 0, input.length - (m + 1), m + 1));
      logits.dispose();
      verdict = await this.verify(rows, drafted, draft.probs);
    } finally {
      ids.dispose();
    }
    const { accepted, next } = verdict;
    if (accepted === m) this.pending = [];
    else if (this.state.length === 0) {
      this.cache.length = start + this.pending.length + 1 + accepted;
      this.pending = [];
    } else {
      tidy(() => this.state.forEach((t, j) => copyInto(t, this.saved[j]!)));
      this.cache.length = start;
      this.pending = input.slice(0, this.pending.length + 1 + accepted);
    }
    this.drafter.accepted(accepted);
    return { tokens: [...drafted.slice(0, accepted), next], drafted: m, accepted, draftMs: t1 - t0, verifyMs: performance.now() - t1 };
  }

  /** The verdict over [m + 1, V] logits rows (disposed). */
  private async verify(rows: Tensor, drafted: readonly number[], q: readonly Float64Array[] | undefined): Promise<{ accepted: number; next: number }> {
    const m = drafted.length;
    if (this.greedy) {
      // m + 1 argmaxes in one dispatch and one read: the longest agreeing prefix, then the target's token.
      const argmax = (await this.pick(rows, m + 1)).map((r) => r.next);
      let accepted = 0;
      while (accepted < m && drafted[accepted] === argmax[accepted]) accepted++;
      return { accepted, next: argmax[accepted]! };
    }
    const p = await this.probs(rows);
    return acceptOrResample(p, q ?? drafted.map(() => undefined), drafted, this.options.uniform);
  }

  /** The target's token for each of `count` logits rows (disposed): argmax on the device, or a host draw from p. */
  private async pick(logits: Tensor, count: number): Promise<{ next: number }[]> {
    if (this.greedy) {
      const ids = tidy(() =>
        count === 1
          ? sampleToken(logits, { temperature: 0 })
          : sampleRows(
              logits,
              Array.from({ length: count }, () => ({ temperature: 0 })),
            ),
      );
      logits.dispose();
      try {
        return [...(await ids.toArray())].map((next) => {
          if (next < 0) throw new Error('generate: every logit is -Inf or NaN; nothing can be sampled');
          return { next };
        });
      } finally {
        ids.dispose();
      }
    }
    return (await this.probs(logits)).map((p) => ({ next: drawFrom(p, this.options.uniform()) }));
  }

  private async probs(logits: Tensor): Promise<Float64Array[]> {
    const [count, vocab] = [logits.shape[0]!, logits.shape[logits.ndim - 1]!];
    const all = (await logits.toArray()) as Float32Array;
    logits.dispose();
    return Array.from({ length: count }, (_, r) => samplingProbs(all.subarray(r * vocab, (r + 1) * vocab), this.options.settings));
  }

  dispose(): void {
    this.cache.dispose();
    for (const t of this.saved) t.dispose();
  }
}

/** The uniform draws of a speculative run: the seed's own stream, else the caller's generator, else the default. */
export function speculativeUniform(options: Pick<GenerateOptions, 'seed' | 'generator'>): () => number {
  const g = options.seed !== undefined ? new Generator(options.seed) : (options.generator ?? defaultGenerator);
  return () => g.uniform();
}

/** generate()'s loop with speculation: the same stop rules and stats, plus SpeculativeStats. */
export async function* generateSpeculative(
  model: CausalLM,
  tokenizer: TextTokenizer,
  ids: readonly number[],
  run: { options: GenerateOptions; maxNew: number; stops: ReadonlySet<number>; config: SpeculativeConfig },
): AsyncGenerator<GeneratedToken, GenerationStats> {
  const { options, maxNew, stops, config } = run;
  const k = options.numSpeculativeTokens ?? DEFAULT_SPECULATIVE_TOKENS;
  const { temperature, topK, topP, minP } = options;
  const settings = { temperature, topK, topP, minP };
  const uniform = speculativeUniform(options);
  const drafter = makeDrafter(model, config, settings, uniform);
  let session: SpeculativeSession;
  try {
    session = new SpeculativeSession(model, drafter, { k, settings, uniform, compilePrefill: options.compile });
  } catch (err) {
    if (config.kind !== 'custom') drafter.dispose();
    throw err;
  }
  const output = new SequenceOutput(tokenizer, stops, options.stopStrings);
  const history = [...ids];
  const spec: SpeculativeStats = {
    kind: config.kind,
    numSpeculativeTokens: k,
    targetForwards: 0,
    draftedTokens: 0,
    acceptedTokens: 0,
    acceptanceRate: 0,
    tokensPerTargetForward: 0,
    draftMs: 0,
    verifyMs: 0,
  };
  const stats: GenerationStats = { promptTokens: ids.length, generatedTokens: 0, prefillMs: 0, decodeMs: 0, dispatchesPerToken: 0, stopReason: 'max-tokens' };
  let emittedAfterPrefill = 0;
  try {
    const t0 = performance.now();
    let done = false;
    if (ids.length > session.cache.capacity) {
      stats.stopReason = 'cache-full';
      done = true;
    }
    while (!done && stats.generatedTokens < maxNew) {
      if (options.signal?.aborted) {
        stats.stopReason = 'aborted';
        break;
      }
      let tokens: number[];
      if (stats.generatedTokens === 0) {
        tokens = [await session.prefill(ids)];
        stats.prefillMs = performance.now() - t0;
      } else {
        if (!session.hasRoom) {
          stats.stopReason = 'cache-full';
          break;
        }
        const step = await session.step(history, maxNew - stats.generatedTokens);
        spec.targetForwards++;
        spec.draftedTokens += step.drafted;
        spec.acceptedTokens += step.accepted;
        spec.draftMs += step.draftMs;
        spec.verifyMs += step.verifyMs;
        emittedAfterPrefill += step.tokens.length;
        tokens = step.tokens;
      }
      for (const id of tokens) {
        history.push(id);
        stats.generatedTokens++;
        const out = output.push(id);
        if (out.emit) yield { id, text: out.text, index: stats.generatedTokens - 1 };
        if (out.stop) {
          stats.stopReason = out.stop;
          done = true;
          break;
        }
      }
    }
    stats.decodeMs = performance.now() - t0 - stats.prefillMs;
    spec.acceptanceRate = spec.draftedTokens > 0 ? spec.acceptedTokens / spec.draftedTokens : 0;
    spec.tokensPerTargetForward = spec.targetForwards > 0 ? emittedAfterPrefill / spec.targetForwards : 0;
    stats.speculative = spec;
    return stats;
  } finally {
    session.dispose();
    if (config.kind !== 'custom') drafter.dispose();
  }
}
