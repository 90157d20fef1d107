// The one decoder forward: embedding, then for each layer h + mixer(norm(h)) and x + feedForward(norm(x)), then the
// head. Every form runs it (decode with the fused MoE, the per-expert eager baseline, the paged batch, training);
// a form only says how each step is computed (decoder-blocks.ts, training-blocks.ts).
//
// The loop is a generator so it is written once for both kinds of caller: a step that must read back (the
// per-expert MoE's routing, training's top-k) returns a promise, which the loop yields to an async driver; a form
// whose steps are all synchronous runs under the sync driver, so a captured decode step never awaits.
import { tidy } from '../../core/scope.js';
import type { Tensor } from '../../core/tensor.js';
import { dispatchCount } from '../../runtime/stats.js';

/** How one form of the forward computes each step; FF is Tensor for a synchronous form. */
export interface DecoderSteps<FF extends Tensor | Promise<Tensor> = Tensor | Promise<Tensor>> {
  readonly numLayers: number;
  /** The token embeddings, float32 [S, hidden]. */
  embed(tokens: Tensor): Tensor;
  /** h + layer i's token mixer over its normed input. */
  mix(h: Tensor, i: number): Tensor;
  /** x + layer i's feed-forward over its normed input (it disposes what it makes but the result). */
  feedForward(x: Tensor, i: number): FF;
  /** The logits from the last hidden state. */
  head(h: Tensor): Tensor;
}

export interface DecoderRun {
  readonly logits: Tensor;
  /** Dispatches in all, and per decoder layer. */
  readonly dispatches: number;
  readonly perLayer: number;
  /** Dispatches of each layer, by index. */
  readonly layers: readonly number[];
}

function* decoderLayers(steps: DecoderSteps, tokens: Tensor): Generator<Promise<Tensor>, DecoderRun, Tensor> {
  const d0 = dispatchCount();
  let h = tidy(() => steps.embed(tokens));
  try {
    const l0 = dispatchCount();
    const layers: number[] = [];
    for (let i = 0; i < steps.numLayers; i++) {
      const before = dispatchCount();
      const x = tidy(() => steps.mix(h, i));
      h.dispose(); // layer by layer, so a long prefill holds one hidden state at a time
      h = x;
      const y = steps.feedForward(x, i);
      const next = y instanceof Promise ? yield y : y;
      x.dispose();
      h = next;
      layers.push(dispatchCount() - before);
    }
    const perLayer = (dispatchCount() - l0) / Math.max(1, steps.numLayers);
    const logits = tidy(() => steps.head(h));
    return { logits, dispatches: dispatchCount() - d0, perLayer, layers };
  } finally {
    h.dispose();
  }
}

/** The forward of a form whose steps never read back (decode, prefill, the paged batch): no await anywhere. */
export function runDecoder(steps: DecoderSteps<Tensor>, tokens: Tensor): DecoderRun {
  const layers = decoderLayers(steps, tokens);
  const step = layers.next();
  // A synchronous form's steps return tensors, so the loop never yields (the type rules a promise out).
  if (step.done) return step.value;
  layers.return(undefined as never); // frees the hidden state
  throw new TypeError('runDecoder: a step returned a promise; run this form with runDecoderAsync');
}

/** The forward of a form with steps that read back (the per-expert MoE, training), awaiting only those. */
export async function runDecoderAsync(steps: DecoderSteps, tokens: Tensor): Promise<DecoderRun> {
  const layers = decoderLayers(steps, tokens);
  let step = layers.next();
  while (!step.done) {
    let value: Tensor;
    try {
      value = await step.value;
    } catch (e) {
      step = layers.throw(e); // the loop's finally frees the hidden state, then the error goes on
      continue;
    }
    step = layers.next(value);
  }
  return step.value;
}
