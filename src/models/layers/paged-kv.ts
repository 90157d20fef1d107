// A KV cache in fixed-size pages shared by every sequence (vLLM's PagedAttention layout): per layer one key pool and
// one value pool [pages * pageSize, kvHeads, headDim], a free list of page numbers on the host, and per sequence its
// page numbers (on the host too). A sequence takes pages as it grows and gives them all back when it ends, so memory
// follows the tokens actually held, not a worst case per slot. A batched forward uploads every row's position and
// its sequence's page table as one int32 index (ops/paged-cache.ts), shared by all layers.
import type { DeviceName } from '../../runtime/backend.js';
import { DTYPE_INFO, type DType } from '../../core/dtype.js';
import { keep } from '../../core/scope.js';
import type { Tensor } from '../../core/tensor.js';
import { zeros } from '../../ops/creation.js';

export interface KvGeometry {
  readonly layers: number;
  readonly kvHeads: number;
  readonly headDim: number;
}

export interface PagedKvPoolOptions {
  /** Positions a page holds (default 16). */
  pageSize?: number;
  /** Pages in the pool. */
  pages: number;
  /** Default float32. */
  dtype?: DType;
  /** Sequences that may run at once: the state slots a model with recurrent layers allocates (default 16). */
  sequences?: number;
}

/**
 * Per-sequence state that does not grow with the context (a recurrent layer's conv window and state), in slots
 * a running sequence holds from admission to its end or preemption.
 */
export interface SequenceStateSlots {
  readonly free: number;
  /** A slot with its state zeroed (a new sequence), or undefined when none is free. */
  take(): number | undefined;
  give(slot: number): void;
  dispose(): void;
}

/** Bytes one cached position takes in every layer's keys and values. */
export function kvBytesPerPosition(g: KvGeometry, dtype: DType = 'float32'): number {
  return 2 * g.layers * g.kvHeads * g.headDim * DTYPE_INFO[dtype].itemBytes;
}

export class PagedKvPool {
  readonly keys: Tensor[];
  readonly values: Tensor[];
  readonly pageSize: number;
  readonly pages: number;
  private readonly free: number[];

  constructor(
    readonly geometry: KvGeometry,
    options: PagedKvPoolOptions,
    readonly device: DeviceName,
    /** The recurrent layers' per-sequence states, for hybrid models. */
    readonly states?: SequenceStateSlots,
  ) {
    this.pageSize = options.pageSize ?? 16;
    this.pages = options.pages;
    if (!Number.isInteger(this.pageSize) || this.pageSize <= 0) throw new RangeError(`PagedKvPool: pageSize must be a positive integer, got ${this.pageSize}`);
    if (!Number.isInteger(this.pages) || this.pages <= 0) throw new RangeError(`PagedKvPool: pages must be a positive integer, got ${this.pages}`);
    const shape = [this.pages * this.pageSize, geometry.kvHeads, geometry.headDim];
    const dtype = options.dtype ?? 'float32';
    this.keys = Array.from({ length: geometry.layers }, () => keep(zeros(shape, { dtype, device })));
    this.values = Array.from({ length: geometry.layers }, () => keep(zeros(shape, { dtype, device })));
    // Popped from the end: page 0 first.
    this.free = Array.from({ length: this.pages }, (_, i) => this.pages - 1 - i);
  }

  get freePages(): number {
    return this.free.length;
  }

  /** Whether a new sequence of `positions` fits now: its pages, and a state slot when the model has states. */
  canHold(positions: number): boolean {
    return this.pagesFor(positions) <= this.freePages && (!this.states || this.states.free > 0);
  }

  /** Pages a sequence of `positions` needs. */
  pagesFor(positions: number): number {
    return Math.ceil(positions / this.pageSize);
  }

  /** Takes n pages, or none (undefined) when fewer are free. */
  take(n: number): number[] | undefined {
    if (n > this.free.length) return undefined;
    return this.free.splice(this.free.length - n, n).reverse();
  }

  give(pages: readonly number[]): void {
    this.free.push(...[...pages].reverse());
  }

  dispose(): void {
    for (const t of [...this.keys, ...this.values]) t.dispose();
    this.states?.dispose();
  }
}

/** One sequence's pages in a pool, in order, and its state slot when the model has recurrent layers. */
export class PagedSequence {
  readonly pages: number[] = [];
  /** Held from the first reserve to release (zeroed when taken). */
  stateSlot: number | undefined;

  constructor(readonly pool: PagedKvPool) {}

  /** Makes room for `positions` in all; false (nothing taken) when the pool lacks the pages or a state slot. */
  reserve(positions: number): boolean {
    const need = this.pool.pagesFor(positions) - this.pages.length;
    if (need > this.pool.freePages) return false;
    const states = this.pool.states;
    if (states && this.stateSlot === undefined) {
      this.stateSlot = states.take();
      if (this.stateSlot === undefined) return false;
    }
    if (need <= 0) return true;
    this.pages.push(...this.pool.take(need)!);
    return true;
  }

  /** Gives every page, and the state slot, back. */
  release(): void {
    this.pool.give(this.pages);
    this.pages.length = 0;
    if (this.stateSlot !== undefined) this.pool.states!.give(this.stateSlot);
    this.stateSlot = undefined;
  }
}

/** A sequence's part in a batched forward: `rows` tokens at positions start.. of its pages. */
export interface PagedSlot {
  readonly sequence: PagedSequence;
  readonly start: number;
  readonly rows: number;
}
