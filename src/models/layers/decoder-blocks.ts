// What a decoder family provides to the shared forward (decoder-forward.ts), and the inference forms built from it.
// A family's blocks say which forms it supports by the interfaces they implement: DecoderBlocks (every family: over
// its own contiguous cache, for decode, prefill and the per-expert baseline), PagedDecoderBlocks (continuous
// batching over a paged KV pool), TrainableDecoderBlocks (training-blocks.ts: differentiable, with LoRA sites).
import type { Tensor } from '../../core/tensor.js';
import type { Weight } from '../../formats/checkpoint.js';
import { tensor } from '../../ops/creation.js';
import { cast } from '../../ops/convert.js';
import { add } from '../../ops/elementwise.js';
import { indexSelect } from '../../ops/index-select.js';
import { rmsNorm } from '../../ops/nn.js';
import { pagedIndex, type PagedIndex } from '../../ops/paged-cache.js';
import { shortConvSegmentTable } from '../../ops/short-conv.js';
import { tidy } from '../../core/scope.js';
import { denseMlp, fusedMoe, lmHead, perExpertMoe, type Routing } from './blocks.js';
import { runDecoder, runDecoderAsync, type DecoderRun, type DecoderSteps } from './decoder-forward.js';
import type { PagedKvPool, PagedSlot } from './paged-kv.js';
import type { DenseMlpWeights, MoeWeights } from './weights.js';

/** What every form of a family's forward shares: embedding, final norm and head, each layer's feed-forward. */
export interface DecoderTrunk {
  readonly embedTokens: Tensor;
  readonly numLayers: number;
  /** The final norm and its eps (also the feed-forward norms' eps). */
  readonly norm: Tensor;
  readonly eps: number;
  readonly lmHead: Weight;
  /** The MoE router (undefined for dense models). */
  readonly routing?: Routing;
  /** The norm in front of layer i's feed-forward, and its weights. */
  feedForward(i: number): { readonly norm: Tensor; readonly weights: DenseMlpWeights | MoeWeights };
}

/** Where a forward's tokens go in a contiguous cache. */
export interface CacheRows {
  /** Cache row of the first token. */
  readonly start: number;
  /** int32 [1] device scalar holding `start`, for a step captured once and replayed at any position. */
  readonly position?: Tensor;
}

/** A family's layers over its own contiguous cache (every family). */
export interface DecoderBlocks<Cache> extends DecoderTrunk {
  /** h + layer i's token mixer (attention, a short conv, a DeltaNet) over its normed input, its state in cache. */
  mix(h: Tensor, i: number, cache: Cache, rows: CacheRows): Tensor;
}

/** A batch of sequences over a paged pool: their rows consecutive, each row's position and pages in the index. */
export interface PagedBatch {
  readonly pages: PagedIndex;
  readonly slots: readonly PagedSlot[];
  /**
   * For a pool with state slots: int32 (first row, rows, state slot) per sequence (shortConvSegmentTable), shared by
   * every recurrent layer of the forward.
   */
  readonly stateSegments?: Tensor;
}

/**
 * A batched step's device inputs built by the caller instead of the forward: a captured step's fixed buffers
 * (serve/captured-step.ts), rewritten with writeTensor before each replay.
 */
export interface PagedStepInputs {
  readonly pages: PagedIndex;
  readonly stateSegments?: Tensor;
}

/** A family's layers over a paged KV pool (families that support continuous batching). */
export interface PagedDecoderBlocks extends DecoderTrunk {
  /** The token mixer of layer i for a batch of sequences, its state in the pool. */
  mixPaged(h: Tensor, i: number, pool: PagedKvPool, batch: PagedBatch): Tensor;
}

const embed = (trunk: DecoderTrunk) => (tokens: Tensor) => cast(indexSelect(trunk.embedTokens, 0, tokens), 'float32');

/** x + the fused feed-forward of layer i: SwiGLU MLP, or the MoE with no read back (decode and prefill alike). */
function fusedFeedForward(trunk: DecoderTrunk, x: Tensor, i: number): Tensor {
  return tidy(() => {
    const ff = trunk.feedForward(i);
    const normed = rmsNorm(x, ff.norm, trunk.eps);
    return ff.weights.kind === 'dense' ? denseMlp(normed, ff.weights, x) : fusedMoe(normed, ff.weights, trunk.routing!, x);
  });
}

/** x + layer i's feed-forward with the MoE as the per-expert loop (its routing read back). */
function perExpertFeedForward(trunk: DecoderTrunk, x: Tensor, i: number): Tensor | Promise<Tensor> {
  const ff = trunk.feedForward(i);
  const normed = rmsNorm(x, ff.norm, trunk.eps);
  const w = ff.weights;
  if (w.kind === 'dense') {
    const out = tidy(() => denseMlp(normed, w, x));
    normed.dispose();
    return out;
  }
  return perExpertMoe(normed, w, trunk.routing!).then((mlp) => {
    const out = tidy(() => add(x, mlp));
    mlp.dispose();
    normed.dispose();
    return out;
  });
}

/** Embedding, every layer (mixer, then feed-forward with its residual in the last kernel), the head: no reads. */
export function decoderForward<Cache>(blocks: DecoderBlocks<Cache>, tokens: Tensor, cache: Cache, rows: CacheRows, lastOnly: boolean): DecoderRun {
  return runDecoder(
    {
      numLayers: blocks.numLayers,
      embed: embed(blocks),
      mix: (h, i) => blocks.mix(h, i, cache, rows),
      feedForward: (x, i) => fusedFeedForward(blocks, x, i),
      head: (h) => lmHead(h, blocks.norm, blocks.eps, blocks.lmHead, lastOnly),
    },
    tokens,
  );
}

/** The eager baseline: the same mixers, then the per-expert MoE loop that reads the routing back every layer. */
export function decoderForwardPerExpert<Cache>(
  blocks: DecoderBlocks<Cache>,
  tokens: Tensor,
  cache: Cache,
  start: number,
  lastOnly: boolean,
): Promise<DecoderRun> {
  const steps: DecoderSteps = {
    numLayers: blocks.numLayers,
    embed: embed(blocks),
    mix: (h, i) => blocks.mix(h, i, cache, { start }),
    feedForward: (x, i) => perExpertFeedForward(blocks, x, i),
    head: (h) => lmHead(h, blocks.norm, blocks.eps, blocks.lmHead, lastOnly),
  };
  return runDecoderAsync(steps, tokens);
}

/**
 * decoderForward for a batch of sequences over a paged KV pool, their tokens consecutive: logits [slots, vocab],
 * one row per sequence (its last token's). With `inputs`, the page index and state segments are the caller's (no
 * upload: a captured step), and only the slots' count and rows are read.
 */
export function decoderForwardPaged(
  blocks: PagedDecoderBlocks,
  tokens: Tensor,
  slots: readonly PagedSlot[],
  pool: PagedKvPool,
  inputs?: PagedStepInputs,
): DecoderRun {
  const pages =
    inputs?.pages ??
    pagedIndex(
      slots.map((s) => ({ pages: s.sequence.pages, start: s.start, rows: s.rows })),
      pool.pageSize,
      tokens.device,
    );
  const stateSegments = inputs
    ? inputs.stateSegments
    : pool.states
      ? tensor(
          shortConvSegmentTable(
            slots.map((s) => s.rows),
            slots.map((s) => s.sequence.stateSlot!),
          ),
          { dtype: 'int32', device: tokens.device },
        )
      : undefined;
  const batch = { pages, slots, stateSegments };
  const head = (h: Tensor) => {
    if (slots.every((s) => s.rows === 1)) return lmHead(h, blocks.norm, blocks.eps, blocks.lmHead, false);
    let end = 0;
    const last = slots.map((s) => (end += s.rows) - 1);
    return lmHead(indexSelect(h, 0, tensor(last, { dtype: 'int32', device: h.device })), blocks.norm, blocks.eps, blocks.lmHead, false);
  };
  return runDecoder(
    {
      numLayers: blocks.numLayers,
      embed: embed(blocks),
      mix: (h, i) => blocks.mixPaged(h, i, pool, batch),
      feedForward: (x, i) => fusedFeedForward(blocks, x, i),
      head,
    },
    tokens,
  );
}
