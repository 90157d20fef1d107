// A fine-tuning run over a loaded model: LoRA adapters on a frozen base, or every float weight (--full), trained
// with AdamW, global-norm clipping and a warmup + cosine schedule on packed sequences of token ids. Each step is
// forward (decoder-training.ts), crossEntropy, backward, clip, one fused optimizer update; the step reads back
// only the loss.
import type { CausalLM } from '../models/causal-lm.js';
import type { Tensor } from '../core/tensor.js';
import { isFp8 } from '../core/dtype.js';
import { DTypeError } from '../core/errors.js';
import { tensor } from '../ops/creation.js';
import { crossEntropy } from '../ops/loss.js';
import { AdamW } from '../optim/adam.js';
import { clipGradNorm } from '../optim/clip.js';
import { constantLr, cosineWithWarmup, LrScheduler } from '../optim/schedule.js';
import { gpuCounters } from '../runtime/stats.js';
import { trainingLogits, trainingLogitsSync, trainingView, type TrainingView } from './decoder-training.js';
import { compile, type CompiledFunction } from '../compile/compile.js';
import type { TrainingForwardOptions } from '../models/layers/training-blocks.js';
import type { LoraAdapter } from './lora.js';

export interface FineTuneOptions {
  /** Total steps (the schedule's length). */
  steps: number;
  lr: number;
  /** Linear warmup steps, then cosine decay to minLrRatio * lr (default: 10% of steps, ratio 0.1). */
  warmupSteps?: number;
  minLrRatio?: number;
  schedule?: 'cosine' | 'constant';
  weightDecay?: number;
  /** Global gradient-norm clip (default 1; 0 turns it off). */
  maxGradNorm?: number;
  /** --full with 16-bit weights: step float32 master copies (default true; 4 more bytes per weight). */
  masterWeights?: boolean;
  /**
   * AdamW with its step count and lr on the device (torch's capturable=True), so a recorded step (capture(),
   * compile()) replays with the right update at every step; one more dispatch per step. Default false.
   */
  capturable?: boolean;
  /** Options of the training forward (the delta rule's chunk, the MoE experts composed per expert, ...). */
  forward?: TrainingForwardOptions;
  /**
   * Run each step's device work (forward, loss, backward, clip, update) through compile(): from the third step on
   * one replay, its elementwise runs fused. Implies capturable. A forward that must read back (the per-expert MoE
   * of trained or FP8 experts) or a step compile() keeps eager runs as before. Default false.
   */
  compile?: boolean;
}

export interface StepResult {
  readonly step: number;
  readonly loss: number;
  readonly lr: number;
  readonly tokens: number;
  readonly ms: number;
  /** GPU dispatches of the whole step, and of the optimizer update alone. */
  readonly dispatches: number;
  readonly optimizerDispatches: number;
}

/** What a run trains: an adapter on a frozen base, or the model's own float weights. */
export type Trainable = { readonly kind: 'lora'; readonly adapter: LoraAdapter } | { readonly kind: 'full' };

export class FineTune {
  readonly view: TrainingView;
  readonly params: readonly Tensor[];
  readonly optimizer: AdamW;
  private readonly scheduler: LrScheduler;
  private stepCount = 0;

  constructor(
    readonly model: CausalLM,
    readonly trainable: Trainable,
    readonly options: FineTuneOptions,
  ) {
    this.view = trainingView(model);
    if (trainable.kind === 'lora') this.params = trainable.adapter.parameters();
    else {
      const weights = model.weightTensors();
      const fp8 = weights.find((t) => isFp8(t.dtype));
      if (fp8)
        throw new DTypeError(`full fine-tuning needs float weights, the model has ${fp8.describe()} (load it in float32 or bfloat16, or train a LoRA adapter)`);
      // The scales of FP8 weights are excluded above; the rest (norms, embeddings, projections) are all trained.
      this.params = weights.map((t) => t.requiresGrad_());
    }
    this.optimizer = new AdamW(this.params, {
      lr: options.lr,
      weightDecay: options.weightDecay ?? 0,
      masterWeights: options.masterWeights ?? true,
      capturable: options.capturable || options.compile,
    });
    if (options.compile) this.compiled = compile((inputs: Tensor, targets: Tensor) => this.deviceStep(inputs, targets), { label: 'train step' });
    const warmup = options.warmupSteps ?? Math.floor(options.steps / 10);
    this.scheduler = new LrScheduler(
      this.optimizer,
      options.schedule === 'constant' ? constantLr() : cosineWithWarmup(warmup, options.steps, options.minLrRatio ?? 0.1),
    );
  }

  /** The schedule's state, saved with the optimizer's. */
  get schedulerState() {
    return this.scheduler.stateDict();
  }

  /** Trainable values per parameter and bytes of optimizer state (AdamW: two float32 moments each). */
  get parameterCount(): number {
    return this.params.reduce((n, p) => n + p.numel, 0);
  }

  /** The compiled device step (options.compile), until a step shows it cannot be (then undefined: eager). */
  private compiled: CompiledFunction<[Tensor, Tensor], Tensor> | undefined;

  /** Forward, loss, backward, clip and update with no read back (what options.compile compiles); returns the loss. */
  private deviceStep(inputs: Tensor, targets: Tensor): Tensor {
    const delta = this.trainable.kind === 'lora' ? this.trainable.adapter.delta : undefined;
    return this.update(trainingLogitsSync(this.view, inputs, delta, this.options.forward), targets).loss.detach();
  }

  /** Loss, backward, clip and the update from the logits; counts the update's dispatches. */
  private update(logits: Tensor, targets: Tensor): { loss: Tensor; optimizerDispatches: number } {
    const loss = crossEntropy(logits, targets);
    logits.dispose();
    loss.backward();
    if ((this.options.maxGradNorm ?? 1) > 0) clipGradNorm(this.params, this.options.maxGradNorm ?? 1).dispose();
    const o0 = gpuCounters().dispatches;
    this.optimizer.step();
    const optimizerDispatches = gpuCounters().dispatches - o0;
    this.optimizer.zeroGrad();
    return { loss, optimizerDispatches };
  }

  /** How the last steps ran: 'compiled' (compile()'s explain() says more), or 'eager' with why. */
  get compileStatus(): string {
    if (!this.options.compile) return 'eager';
    const s = this.compiled?.stats().signatures[0];
    return s ? `${s.mode}${s.reason ? `: ${s.reason}` : ''}` : 'eager: the forward reads back';
  }

  /** One step on `sequence` (S + 1 token ids: inputs are the first S, targets the last S). */
  async step(sequence: readonly number[]): Promise<StepResult> {
    const t0 = performance.now();
    const d0 = gpuCounters().dispatches;
    const device = this.model.device;
    const s = sequence.length - 1;
    const inputs = tensor(sequence.slice(0, s), { dtype: 'int32', device });
    const targets = tensor(sequence.slice(1), { dtype: 'int32', device });
    const lr = this.optimizer.lr;
    let lossValue: number;
    let optimizerDispatches: number;
    try {
      const done = this.compiledDeviceStep(inputs, targets) ?? (await this.eagerDeviceStep(inputs, targets));
      optimizerDispatches = done.optimizerDispatches;
      this.scheduler.step();
      lossValue = await done.loss.item();
      done.loss.dispose();
    } finally {
      inputs.dispose();
      targets.dispose();
    }
    this.stepCount++;
    return { step: this.stepCount, loss: lossValue, lr, tokens: s, ms: performance.now() - t0, dispatches: gpuCounters().dispatches - d0, optimizerDispatches };
  }

  /** The step through compile() (its update's dispatches are not told apart: 0), or undefined where it cannot run. */
  private compiledDeviceStep(inputs: Tensor, targets: Tensor): { loss: Tensor; optimizerDispatches: number } | undefined {
    if (!this.compiled) return undefined;
    try {
      return { loss: this.compiled(inputs, targets), optimizerDispatches: 0 };
    } catch (e) {
      // A layer that reads back (runDecoder's TypeError): the eager step from now on.
      if (!(e instanceof TypeError)) throw e;
      this.compiled = undefined;
      return undefined;
    }
  }

  /** Forward (awaiting a layer that reads back), loss, backward, clip and the update, op by op. */
  private async eagerDeviceStep(inputs: Tensor, targets: Tensor): Promise<{ loss: Tensor; optimizerDispatches: number }> {
    const delta = this.trainable.kind === 'lora' ? this.trainable.adapter.delta : undefined;
    return this.update(await trainingLogits(this.view, inputs, delta, this.options.forward), targets);
  }

  /** Releases the optimizer state (the adapter or weights stay with their owner). */
  dispose(): void {
    this.compiled?.reset();
    this.optimizer.dispose();
    if (this.trainable.kind === 'full') for (const p of this.params) p.zeroGrad();
  }
}

/**
 * Packs token ids into training sequences of seqLen + 1 tokens (inputs and their next-token targets), windows
 * overlapping by one token so every token is a target once. A short corpus is repeated to fill one window.
 */
export function packSequences(ids: readonly number[], seqLen: number): number[][] {
  if (!Number.isInteger(seqLen) || seqLen < 1) throw new RangeError(`sequence length must be a positive integer, got ${seqLen}`);
  if (ids.length < 2) throw new RangeError(`the training text has ${ids.length} token(s); at least 2 are needed`);
  let all = [...ids];
  while (all.length < seqLen + 1) all = all.concat(ids);
  const out: number[][] = [];
  for (let at = 0; at + seqLen + 1 <= all.length; at += seqLen) out.push(all.slice(at, at + seqLen + 1));
  return out;
}
