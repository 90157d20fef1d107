// Speculative decoding's `mtp` drafter: the target's own multi-token-prediction layer (Qwen3.5 / Qwen3.6's `mtp.*`,
// models/qwen3_5/mtp.ts). The drafter runs the target's forwards itself (Drafter.forwardTarget), so it keeps the
// hidden state of every row the target computed. Its MTP cache row r pairs the target's hidden state at r with the
// token at r + 1; each round feeds the rows verified since the last round (one forward, the last of them giving the
// first draft), then drafts k - 1 more one at a time, each from the previous step's output hidden state. Those
// chained rows are dropped at the next round (the cache length set back), whatever the target kept: the kept
// tokens' rows are fed again with the target's own hidden states, as vLLM's proposer does.
import { keep, tidy } from '../core/scope.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from '../ops/creation.js';
import { sampleToken } from '../ops/sample.js';
import { cat, narrow } from '../ops/shape-ops.js';
import type { CausalLM, ModelCache } from '../models/causal-lm.js';
import type { Qwen35Cache } from '../models/qwen3_5/model.js';
import type { MtpStep, Qwen35Mtp } from '../models/qwen3_5/mtp.js';
import { SpeculativeError, type Draft, type Drafter } from './drafters.js';
import { drawFrom, samplingProbs, type ProbsSettings } from './speculative-sampling.js';

/** What the drafter needs of the target: a forward that keeps its hidden states, and its MTP layer. */
export interface MtpTarget extends CausalLM {
  forwardWithHidden(tokens: Tensor, cache: ModelCache, options?: { lastOnly?: boolean }): { logits: Tensor; hidden: Tensor };
  multiTokenPredictor(): Qwen35Mtp | { missing: string; mtpLayers: number };
}

const isMtpTarget = (m: CausalLM): m is MtpTarget =>
  typeof (m as Partial<MtpTarget>).forwardWithHidden === 'function' && typeof (m as Partial<MtpTarget>).multiTokenPredictor === 'function';

/** The MTP drafter of a target, or a SpeculativeError saying why it has none. */
export function mtpDrafter(target: CausalLM, settings: ProbsSettings, uniform: () => number): MtpDrafter {
  if (!isMtpTarget(target))
    throw new SpeculativeError(
      `speculative 'mtp' runs the model's own multi-token-prediction layer (Qwen3.5 / Qwen3.6, mtp.*); a ${target.config.modelType} model has none (use 'draft' or 'ngram')`,
    );
  const mtp = target.multiTokenPredictor();
  if ('missing' in mtp)
    throw new SpeculativeError(
      `speculative 'mtp': the checkpoint has no multi-token-prediction layer: tensor '${mtp.missing}' is missing (config mtp_num_hidden_layers = ${mtp.mtpLayers}); use 'draft' or 'ngram'`,
    );
  if (mtp.weights.layers.length !== 1)
    throw new SpeculativeError(
      `speculative 'mtp': ${mtp.weights.layers.length} MTP layers; the drafter runs one (mtp_num_hidden_layers = 1, as the releases have)`,
    );
  return new MtpDrafter(target, mtp, settings, uniform);
}

export class MtpDrafter implements Drafter {
  readonly name = 'mtp';
  private readonly cache: Qwen35Cache;
  /** MTP cache rows computed from the target's hidden states: rows [0, fed). */
  private fed = 0;
  /** The target's hidden states of rows [start, start + rows) (from its last forwards), covering the rows not yet fed. */
  private held: { start: number; hidden: Tensor } | undefined;

  constructor(
    private readonly target: MtpTarget,
    private readonly mtp: Qwen35Mtp,
    private readonly settings: ProbsSettings,
    private readonly uniform: () => number,
  ) {
    this.cache = mtp.newCache();
  }

  private get greedy(): boolean {
    return (this.settings.temperature ?? 1) === 0;
  }

  /** The target's forward at its cache's rows, keeping their hidden states for the next round. */
  async forwardTarget(tokens: Tensor, cache: ModelCache, options: { lastOnly?: boolean } = {}): Promise<Tensor> {
    const start = cache.length;
    const { logits, hidden } = this.target.forwardWithHidden(tokens, cache, options);
    const old = this.held;
    let held = { start, hidden };
    // Rows a round skipped (no drafts asked) are still to be fed: keep them in front of the new ones.
    if (old && this.fed < start && old.start <= this.fed && old.start + old.hidden.shape[0]! >= start) {
      held = { start: this.fed, hidden: keep(tidy(() => cat([narrow(old.hidden, 0, this.fed - old.start, start - this.fed), hidden], 0))) };
      hidden.dispose();
    }
    old?.hidden.dispose();
    this.held = held;
    return logits;
  }

  async propose(history: readonly number[], k: number): Promise<Draft> {
    // The last row with both a target hidden state and its next token (history's last token is not in the cache).
    const last = history.length - 2;
    const held = this.held;
    if (k <= 0 || !held || last < this.fed || this.fed < held.start || last >= held.start + held.hidden.shape[0]!) return { tokens: [] };
    const n = last - this.fed + 1;
    this.cache.length = this.fed;
    // The round writes n rows, then k - 1 chained ones.
    k = Math.min(k, this.cache.capacity - this.fed - n + 1);
    if (k <= 0) return { tokens: [] };
    const device = this.target.device;
    const inputs: Tensor[] = [tensor(history.slice(this.fed + 1, last + 2), { dtype: 'int32', device })];
    const rows = narrow(held.hidden, 0, this.fed - held.start, n);
    const tokens: number[] = [];
    const probs: Float64Array[] = [];
    const chained: Tensor[] = [];
    let step: MtpStep | undefined;
    try {
      step = this.mtp.forward(inputs[0]!, rows, this.cache);
      this.fed = last + 1;
      for (let i = 0; i < k; i++) {
        let id: Tensor;
        if (this.greedy) {
          // Greedy drafts stay on the device, each the next step's input: one read for the k ids.
          id = sampleToken(step.logits, { temperature: 0 });
          chained.push(id);
        } else {
          const q = samplingProbs((await step.logits.toArray()) as Float32Array, this.settings);
          const d = drawFrom(q, this.uniform());
          probs.push(q);
          tokens.push(d);
          id = tensor([d], { dtype: 'int32', device });
          inputs.push(id);
        }
        if (i === k - 1) break;
        const next = this.mtp.forward(id, step.hidden, this.cache);
        step.logits.dispose();
        step.hidden.dispose();
        step = next;
      }
      if (this.greedy) {
        const all = tidy(() => cat(chained, 0));
        tokens.push(...(await all.toArray()));
        all.dispose();
      }
    } finally {
      step?.logits.dispose();
      step?.hidden.dispose();
      rows.dispose();
      for (const t of [...inputs, ...chained]) t.dispose();
    }
    return this.greedy ? { tokens } : { tokens, probs };
  }

  /** Nothing to undo here: the next round sets the cache back to the rows fed from the target's hidden states. */
  accepted(_accepted: number): void {}

  dispose(): void {
    this.cache.dispose();
    this.held?.hidden.dispose();
    this.held = undefined;
  }
}
