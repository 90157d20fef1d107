// Captured batched decode steps for the continuous-batching scheduler (the batched counterpart of
// generate/decode-session.ts, the CUDA-graph idea vLLM applies per batch size). The first decode step of a shape runs
// eagerly while its dispatches are recorded (ops/capture.ts); later steps of that shape write their inputs into the
// recorded step's fixed buffers and replay it: no tensors, page index, bind groups or uniforms are built on the host.
//
// A shape is a bucket of rows (1, 2, 4, ... up to the scheduler's max batch) and a bucket of key length (a power
// of two from PAGED_LENGTH up to the positions a sequence may reach). A batch is padded up to its row bucket with
// rows that feed token 0 at position 0 through a page no sequence holds (a free page, borrowed for the step) and,
// for a model with recurrent layers, the pool's scratch state slot; their logits rows are ignored. Attention runs
// over the length bucket: splits past a sequence's own length are empty and merge as exact zeros, and the step runs
// batch-invariant, so every real row gets the bits the eager step gives it.
//
// One int32 buffer per shape holds the step's inputs: the tokens [rows], the page index (per row its position and
// where its page table starts, then one table of lengthBucket / pageSize pages per row) and, for recurrent layers,
// the state segments (first row, rows, slot per row), from which LFM2's short conv and Qwen3.5's Gated DeltaNet
// read each row's state slot on the device. It is written with one writeTensor before each replay.
// Sampling stays outside the recorded step (one sampleRows dispatch, as in the eager step), so penalties, grammar
// masks and per-row parameters never stop a step from being replayed.
import { withBatchInvariance } from '../core/batch-invariance.js';
import { envVar } from '../core/env.js';
import { keep, tidy } from '../core/scope.js';
import type { Tensor } from '../core/tensor.js';
import type { PagedCausalLM } from '../models/causal-lm.js';
import { PagedSequence, type PagedKvPool, type PagedSlot } from '../models/layers/paged-kv.js';
import { capture, writeTensor, type CapturedGraph } from '../ops/capture.js';
import { zeros } from '../ops/creation.js';
import { narrow } from '../ops/shape-ops.js';

/** How a batched decode step ran: recorded (eagerly, while capturing), replayed, or eager. */
export type DecodeStepMode = 'record' | 'replay' | 'eager';

/** The smallest key-length bucket: the paged attention kernel's chunk (one split). */
const PAGED_LENGTH = 256;

/** Row buckets for a max batch: powers of two below it, then it. */
export function decodeBuckets(maxBatch: number): number[] {
  const out: number[] = [];
  for (let b = 1; b < maxBatch; b *= 2) out.push(b);
  out.push(maxBatch);
  return out;
}

export interface CapturedStepsOptions {
  maxBatch: number;
  /** Positions a sequence may reach (the scheduler's maxPositions). */
  maxPositions: number;
  /** Default true; TENSORGPU_CAPTURE=0 turns it off too. */
  capture?: boolean;
  /** Most recorded shapes kept (least recently used evicted); default 2 x the row buckets. */
  maxGraphs?: number;
}

/** A recorded step of one shape and its fixed buffers. */
interface StepGraph {
  readonly rows: number;
  readonly length: number;
  /** int32: tokens, page index, state segments (views below). */
  readonly input: Tensor;
  readonly views: Tensor[];
  /** float32 [rows, vocab], rewritten by every replay. */
  readonly logits: Tensor;
  readonly graph: CapturedGraph;
}

/** Why a model's batched decode steps cannot be captured here, or undefined. */
export function eagerReason(model: PagedCausalLM, pool: PagedKvPool, wanted = true): string | undefined {
  if (model.device !== 'webgpu') return 'not on WebGPU';
  if (!wanted || envVar('TENSORGPU_CAPTURE') === '0') return 'capture turned off';
  if (model.moeMode !== 'fused') return 'the per-expert MoE baseline reads the routing back';
  if (!model.forwardPagedStep || (pool.states && pool.states.scratchSlot === undefined))
    return `${model.config.modelType}'s batched step is not capturable yet`;
  return undefined;
}

export class CapturedDecodeSteps {
  /** Why steps run eagerly (set once, e.g. when recording failed), or undefined while they are captured. */
  reason: string | undefined;
  readonly buckets: number[];
  /** Recorded shapes by `${rows}x${length}`, least recently used first. */
  private readonly graphs = new Map<string, StepGraph>();
  private readonly maxGraphs: number;
  private readonly maxPositions: number;

  constructor(
    private readonly model: PagedCausalLM,
    private readonly pool: PagedKvPool,
    options: CapturedStepsOptions,
  ) {
    this.reason = eagerReason(model, pool, options.capture ?? true);
    this.buckets = decodeBuckets(options.maxBatch);
    this.maxGraphs = options.maxGraphs ?? 2 * this.buckets.length;
    // The recorded key length is a bucket past the longest sequence, within the RoPE tables attentionInputs checks.
    this.maxPositions = Math.min(options.maxPositions, model.ropePositions ?? options.maxPositions);
  }

  /** Shapes recorded and kept. */
  get recorded(): number {
    return this.graphs.size;
  }

  /**
   * Runs the batched decode step of these slots (one row each, `tokens` their inputs) from a recorded step, or
   * records it; returns the logits [bucket, vocab] whose first slots.length rows are the batch's (owned here: valid
   * until the next step, never disposed by the caller), or undefined when this step must run eagerly.
   */
  run(tokens: readonly number[], slots: readonly PagedSlot[]): { logits: Tensor; mode: 'record' | 'replay' } | undefined {
    if (this.reason !== undefined) return undefined;
    const n = slots.length;
    const rows = this.buckets.find((b) => b >= n);
    if (rows === undefined || slots.some((s) => s.rows !== 1)) return undefined;
    const pool = this.pool;
    const longest = Math.max(...slots.map((s) => s.start + 1));
    let length = PAGED_LENGTH;
    while (length < longest) length *= 2;
    length = Math.max(longest, Math.min(length, this.maxPositions));
    // Padding rows write their keys into a page nobody holds, borrowed for the step (never a cached one).
    let scratch: number | undefined;
    if (rows > n) {
      if (pool.freePages - pool.cachedPages < 1) return undefined;
      scratch = pool.take(1)![0]!;
    }
    try {
      const data = this.inputs(rows, length, tokens, slots, scratch ?? 0);
      const key = `${rows}x${length}`;
      const found = this.graphs.get(key);
      if (found) {
        this.graphs.delete(key);
        this.graphs.set(key, found);
        writeTensor(found.input, data);
        found.graph.replay();
        return { logits: found.logits, mode: 'replay' };
      }
      const recorded = this.record(rows, length, data, slots);
      if (!recorded) return undefined;
      this.graphs.set(key, recorded);
      while (this.graphs.size > this.maxGraphs) {
        const [oldest, g] = this.graphs.entries().next().value as [string, StepGraph];
        this.graphs.delete(oldest);
        this.free(g);
      }
      return { logits: recorded.logits, mode: 'record' };
    } finally {
      // Queued work runs in order: whoever takes the page next writes it after this step's padding rows did.
      if (scratch !== undefined) pool.give([scratch]);
    }
  }

  /** The step's int32 inputs: tokens, page index, state segments (see the header). */
  private inputs(rows: number, length: number, tokens: readonly number[], slots: readonly PagedSlot[], scratch: number): Int32Array {
    const pool = this.pool;
    const perRow = Math.ceil(length / pool.pageSize);
    const indexLength = rows * (2 + perRow);
    const data = new Int32Array(rows + indexLength + (pool.states ? 3 * rows : 0));
    const index = rows;
    const segments = rows + indexLength;
    for (let t = 0; t < rows; t++) {
      const slot = slots[t];
      data[t] = slot ? tokens[t]! : 0;
      data[index + 2 * t] = slot ? slot.start : 0;
      data[index + 2 * t + 1] = 2 * rows + t * perRow;
      const table = index + 2 * rows + t * perRow;
      if (slot) data.set(slot.sequence.pages.slice(0, perRow), table);
      else data.fill(scratch, table, table + perRow);
      if (pool.states) {
        data[segments + 3 * t] = t;
        data[segments + 3 * t + 1] = 1;
        data[segments + 3 * t + 2] = slot ? slot.sequence.stateSlot! : pool.states.scratchSlot!;
      }
    }
    return data;
  }

  /** Records the step of a new shape (it runs now, on `data`); undefined when recording failed and eager is safe. */
  private record(rows: number, length: number, data: Int32Array, slots: readonly PagedSlot[]): StepGraph | undefined {
    const pool = this.pool;
    const device = this.model.device;
    const perRow = Math.ceil(length / pool.pageSize);
    const indexLength = rows * (2 + perRow);
    const input = keep(zeros([data.length], { dtype: 'int32', device }));
    const tokens = keep(narrow(input, 0, 0, rows));
    const index = keep(narrow(input, 0, rows, indexLength));
    const segments = pool.states ? keep(narrow(input, 0, rows + indexLength, 3 * rows)) : undefined;
    const views = [tokens, index, ...(segments ? [segments] : [])];
    writeTensor(input, data);
    // The recorded forward reads only the slots' count and rows.
    const padding = new PagedSequence(pool);
    const recordSlots: PagedSlot[] = Array.from({ length: rows }, (_, t) => slots[t] ?? { sequence: padding, start: 0, rows: 1 });
    const inputs = { pages: { index, pageSize: pool.pageSize, rows, maxLength: length }, stateSegments: segments };
    try {
      const { result, graph } = capture(`batched decode step ${rows}x${length}`, () =>
        withBatchInvariance(() => tidy(() => this.model.forwardPagedStep!(tokens, recordSlots, pool, inputs))),
      );
      if (!graph) throw new Error('capture returned no graph on WebGPU');
      return { rows, length, input, views, logits: keep(result), graph };
    } catch (err) {
      for (const t of [...views, input]) t.dispose();
      this.reason = `recording the batched step failed: ${(err as Error).message}`;
      // A model with recurrent layers may have updated some layers' states already: the step cannot be rerun.
      if (pool.states) throw err;
      return undefined;
    }
  }

  private free(g: StepGraph): void {
    g.graph.dispose();
    g.logits.dispose();
    for (const t of g.views) t.dispose();
    g.input.dispose();
  }

  /** Frees every recorded step and its buffers (the server stopping, the model unloaded). */
  dispose(): void {
    for (const g of this.graphs.values()) this.free(g);
    this.graphs.clear();
  }
}
