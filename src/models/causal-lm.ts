// What generation, decode sessions, the bench and the CLI need of a decoder-only model, whatever its family
// (Qwen3 / Qwen3-MoE, LFM2 / LFM2-MoE): a cache per sequence, a forward that queues its ops without reading back
// (so a decode step can be captured), and the figures the bench reports.
import type { DeviceName } from '../runtime/backend.js';
import { DTYPE_INFO, type DType } from '../core/dtype.js';
import type { KvGeometry, PagedKvPool, PagedKvPoolOptions, PagedSlot } from './layers/paged-kv.js';
import type { PagedStepInputs } from './layers/decoder-blocks.js';
import type { Tensor } from '../core/tensor.js';

/** How the MoE block runs: fused (expert ids stay on the device) or a per-expert loop (the baseline it beats). */
export type MoeMode = 'fused' | 'per-expert';

/** A sequence's state on the device (KV rows, conv states), allocated once for `capacity` positions. */
export interface ModelCache {
  /** Positions filled so far. */
  length: number;
  readonly capacity: number;
  /**
   * The tensors a forward overwrites in place (LFM2's conv states, Qwen3.5's DeltaNet conv and recurrent states), as
   * opposed to KV rows, which a later forward at a lower `length` overwrites: what rolling a sequence back (speculative
   * decoding's rejected tokens) must restore. Absent when setting `length` back is a full rollback.
   */
  stateTensors?(): Tensor[];
  dispose(): void;
}

export interface ForwardOptions {
  /** Logits of the last position only (default true). */
  lastOnly?: boolean;
  /**
   * An int32 [1] device tensor holding cache.length, read by the kernels instead of baking the position into their
   * uniforms: what lets a decode step be captured once and replayed (generate/decode-session.ts).
   */
  position?: Tensor;
  /**
   * Run through compile() (a prefill): traced once per token count, start row and cache shape, recorded on the
   * second call and replayed after, the cache's tensors bound as inputs so any cache of the model replays it
   * (decoder-model.ts). Ignored with `position` (a captured decode step) and by the per-expert MoE baseline.
   */
  compile?: boolean;
}

export interface LastForward {
  readonly dispatches: number;
  readonly perLayer: number;
  readonly byKind?: Readonly<Record<string, number>>;
}

/** The config fields every family shares (each family's config has more). */
export interface CausalLMConfig {
  readonly modelType: string;
  readonly vocabSize: number;
  readonly numHiddenLayers: number;
  readonly eosTokenIds: readonly number[];
  readonly moe?: { readonly numExperts: number; readonly numExpertsPerTok: number };
}

export interface CausalLM {
  readonly config: CausalLMConfig;
  readonly device: DeviceName;
  moeMode: MoeMode;
  /**
   * GPU dispatches of the last forward: in all, per decoder layer (the mean), and for hybrid models the most any
   * layer of each kind took (by layer type, e.g. linear_attention / full_attention).
   */
  readonly lastForward: LastForward;
  newCache(): ModelCache;
  /**
   * Runs tokens (int32 [S] on this device) at the cache's positions, updates the cache and returns float32
   * logits [S, vocab] ([1, vocab] with lastOnly, the default).
   */
  forward(tokens: Tensor, cache: ModelCache, options?: ForwardOptions | boolean): Promise<Tensor>;
  /** The forward with no reads (fused MoE): every op queued, nothing awaited. */
  forwardSync(tokens: Tensor, cache: ModelCache, options?: ForwardOptions): Tensor;
  /** Every weight tensor once (a tied lm_head is the embedding). */
  weightTensors(): Tensor[];
  /** compile()'s explain() of the forward run with ForwardOptions.compile (undefined before its first use). */
  explainCompiled?(): string | undefined;
  /** The least a decode step reads: weights once, one embedding row, topK of E experts (see activeBytes). */
  activeWeightBytes(): number;
  /** Frees the weights and the model's own tables. */
  dispose(): void;
}

/**
 * A model that can share decode steps between sequences (continuous batching, serve/batch-scheduler.ts): its KV
 * cache lives in a paged pool, and one forward runs a batch of sequences, each at its own position.
 */
export interface PagedCausalLM extends CausalLM {
  /** Layers, kv heads and head dim of the KV cache (for sizing a pool). */
  readonly kvGeometry: KvGeometry;
  /** Bytes the KV cache takes per position (all layers), in the pool's dtype. */
  kvBytesPerPosition(dtype?: DType): number;
  /** Bytes of one sequence's recurrent state (hybrid models), constant in the context. */
  stateBytesPerSequence?(): number;
  newKvPool(options: PagedKvPoolOptions): PagedKvPool;
  /**
   * Runs each slot's tokens (consecutive in `tokens`, int32 on this device) at its positions, writing their keys and
   * values into its pages (reserved by the caller), and returns float32 logits [slots, vocab] of each slot's last token.
   */
  forwardPaged(tokens: Tensor, slots: readonly PagedSlot[], pool: PagedKvPool): Tensor;
  /**
   * forwardPaged with the page index (and state segments) built by the caller and no host work: what a captured
   * batched decode step records (serve/captured-step.ts). Families whose batched step is not capturable yet lack it.
   */
  forwardPagedStep?(tokens: Tensor, slots: readonly PagedSlot[], pool: PagedKvPool, inputs: PagedStepInputs): Tensor;
  /** Positions the model's tables (RoPE) cover: a captured step's key length stays within them. */
  readonly ropePositions?: number;
}

export function isPagedLM(model: CausalLM): model is PagedCausalLM {
  return typeof (model as Partial<PagedCausalLM>).forwardPaged === 'function';
}

export const tensorBytes = (t: Tensor): number => t.numel * DTYPE_INFO[t.dtype].itemBytes;

/**
 * The least a decode step must read: every weight once, but one row of the embedding (the whole of it again when it
 * is also the lm_head) and only topK of E experts of the stacked expert tensors. KV cache and activations are
 * excluded: they grow with the context and are small here.
 */
export function activeBytes(w: { all: Tensor[]; embedding: Tensor; tiedHead: boolean; experts: Tensor[]; activeFraction: number }): number {
  let total = 0;
  for (const t of w.all) total += tensorBytes(t);
  const row = tensorBytes(w.embedding) / Math.max(1, w.embedding.shape[0]);
  total -= tensorBytes(w.embedding) - row;
  if (w.tiedHead) total += tensorBytes(w.embedding) - row;
  for (const t of w.experts) total -= tensorBytes(t) * (1 - w.activeFraction);
  return total;
}

/** The cache position of the next s tokens, checked against its capacity. */
export function reserve(cache: ModelCache, s: number): number {
  const start = cache.length;
  if (start + s > cache.capacity) throw new RangeError(`the cache holds ${cache.capacity} positions; ${start} used, ${s} more requested`);
  return start;
}
