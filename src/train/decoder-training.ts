// The training forward of the decoder families: the shared decoder forward (models/layers/decoder-forward.ts) with
// the family's training blocks (differentiable mixers and feed-forwards over a whole packed sequence, a LoRA site at
// every projection). What a family's layers are and what its sites are called is the family's (models/<family>/
// training.ts); here is only how a model is asked for them and how the forward is run.
import type { Tensor } from '../core/tensor.js';
import type { CausalLM } from '../models/causal-lm.js';
import { TensorGpuError } from '../core/errors.js';
import { runDecoder, runDecoderAsync } from '../models/layers/decoder-forward.js';
import { DecoderModel } from '../models/layers/decoder-model.js';
import type { ProjectionDelta } from '../models/layers/projection-site.js';
import { isTrainable, trainingSteps, type DecoderTrainingBlocks, type TrainingForwardOptions } from '../models/layers/training-blocks.js';

export type { ProjectionSite, ProjectionDelta } from '../models/layers/projection-site.js';
export type { TrainingLayer, TrainingForwardOptions } from '../models/layers/training-blocks.js';

/** A loaded model seen for training (its family's training blocks): weights by layer, every projection site. */
export type TrainingView = DecoderTrainingBlocks;
/** The family a view is of ('qwen3', 'lfm2', 'qwen3_5'). */
export type TrainingFamily = TrainingView['family'];

/** The training view of a loaded decoder model (the weights are shared, not copied). */
export function trainingView(model: CausalLM): TrainingView {
  if (model instanceof DecoderModel && isTrainable(model.blocks)) return model.blocks.training();
  throw new TensorGpuError(`training supports the decoder families with training blocks (qwen3, lfm2, qwen3_5), not '${model.config.modelType}'`);
}

/** Logits [S, vocab] (float32) of a packed sequence of token ids (int32 [S] on the model's device). */
export async function trainingLogits(view: TrainingView, tokens: Tensor, delta?: ProjectionDelta, options: TrainingForwardOptions = {}): Promise<Tensor> {
  return withRope(view, tokens, async (rope) => (await runDecoderAsync(trainingSteps(view, { rope, delta, options }), tokens)).logits);
}

/** Checks tokens and runs fn with the RoPE tables narrowed to them. */
function withRope<T>(view: TrainingView, tokens: Tensor, fn: (rope: { cos: Tensor; sin: Tensor }) => T): T {
  const s = tokens.shape[0];
  if (tokens.ndim !== 1 || s === 0) throw new RangeError(`trainingLogits: tokens must be a non-empty int32 [S], got ${tokens.describe()}`);
  if (s > view.rope.cos.shape[0])
    throw new RangeError(`trainingLogits: ${s} tokens exceed the model's ${view.rope.cos.shape[0]} RoPE positions (load it with a larger maxSequence)`);
  const rope = { cos: view.rope.cos.narrow(0, 0, s), sin: view.rope.sin.narrow(0, 0, s) };
  const done = () => {
    rope.cos.dispose();
    rope.sin.dispose();
  };
  try {
    const out = fn(rope);
    if (out instanceof Promise) return out.finally(done) as T;
    done();
    return out;
  } catch (e) {
    done();
    throw e;
  }
}

/**
 * trainingLogits with no await, for a forward that never reads back (dense layers, the grouped MoE): what a compiled
 * training step runs. Throws a TypeError where a layer must read back (the per-expert MoE of trained or FP8 experts).
 */
export function trainingLogitsSync(view: TrainingView, tokens: Tensor, delta?: ProjectionDelta, options: TrainingForwardOptions = {}): Tensor {
  return withRope(view, tokens, (rope) => runDecoder(trainingSteps(view, { rope, delta, options }) as never, tokens).logits);
}
