// A KV cache in fixed-size pages shared by every sequence (vLLM's PagedAttention layout): per layer one key pool and
// one value pool [pages * pageSize, kvHeads, headDim], a free list of page numbers on the host, and per sequence its
// page numbers (on the host too). A sequence takes pages as it grows and gives them all back when it ends, so memory
// follows the tokens actually held, not a worst case per slot. A batched forward uploads every row's position and
// its sequence's page table as one int32 index (ops/paged-cache.ts), shared by all layers. Pages are reference
// counted: with a prefix cache (prefix-cache.ts) a full page may be shared by several sequences, and a cached page
// nobody references is kept until the free list runs dry.
import type { DeviceName } from '../../runtime/backend.js';
import type { DType } from '../../core/dtype.js';
import { kvCacheShape, kvRowBytes } from '../../core/kv-fp8.js';
import { keep } from '../../core/scope.js';
import type { Tensor } from '../../core/tensor.js';
import { tidy } from '../../core/scope.js';
import { zeros } from '../../ops/creation.js';
import { clone, copyInto, narrow } from '../../ops/shape-ops.js';
import { PrefixCache, type StateSnapshots } from './prefix-cache.js';

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
  /** Default float32; float8_e4m3fn holds scaled rows (core/kv-fp8.ts). */
  dtype?: DType;
  /** Sequences that may run at once: the state slots a model with recurrent layers allocates (default 16). */
  sequences?: number;
  /**
   * State snapshots a model with recurrent layers allocates beside its sequence slots for the prefix cache
   * (default 0: such a model's sequences then share no cached prefix).
   */
  snapshots?: number;
}

/**
 * Per-sequence state that does not grow with the context (a recurrent layer's conv window and state), in slots
 * a running sequence holds from admission to its end or preemption.
 */
export interface SequenceStateSlots extends StateSnapshots {
  readonly free: number;
  /** A slot with its state zeroed (a new sequence), or undefined when none is free. */
  take(): number | undefined;
  give(slot: number): void;
  /** Snapshot slots in all (kept by the prefix cache at page boundaries). */
  readonly snapshotSlots: number;
  /**
   * A slot no sequence ever holds, for the padding rows of a captured batched step (serve/captured-step.ts) to
   * read and write; absent where the family's batched step is not captured.
   */
  readonly scratchSlot?: number;
  dispose(): void;
}

/** Bytes one cached position takes in every layer's keys and values (FP8: codes and row scales, core/kv-fp8.ts). */
export function kvBytesPerPosition(g: KvGeometry, dtype: DType = 'float32'): number {
  return 2 * g.layers * g.kvHeads * kvRowBytes(dtype, g.headDim);
}

export class PagedKvPool {
  readonly keys: Tensor[];
  readonly values: Tensor[];
  readonly pageSize: number;
  readonly pages: number;
  private readonly free: number[];
  /** Sequences holding each page. */
  private readonly refs: Uint32Array;
  /** The prefix index over this pool's full pages (enablePrefixCache), if any. */
  prefixCache: PrefixCache | undefined;

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
    const dtype = options.dtype ?? 'float32';
    const shape = kvCacheShape(this.pages * this.pageSize, geometry.kvHeads, geometry.headDim, dtype);
    this.keys = Array.from({ length: geometry.layers }, () => keep(zeros(shape, { dtype, device })));
    this.values = Array.from({ length: geometry.layers }, () => keep(zeros(shape, { dtype, device })));
    // Popped from the end: page 0 first.
    this.free = Array.from({ length: this.pages }, (_, i) => this.pages - 1 - i);
    this.refs = new Uint32Array(this.pages);
  }

  /** Keeps full pages in a prefix index for later sequences to share (see prefix-cache.ts). */
  enablePrefixCache(): PrefixCache {
    this.prefixCache ??= new PrefixCache(this.pageSize, this.states && this.states.snapshotSlots > 0 ? this.states : undefined);
    return this.prefixCache;
  }

  /** Pages a sequence can take now: the free ones and the cached ones nobody references (evicted on demand). */
  get freePages(): number {
    return this.free.length + (this.prefixCache?.evictable ?? 0);
  }

  /** Cached pages nobody references (still counted in freePages). */
  get cachedPages(): number {
    return this.prefixCache?.evictable ?? 0;
  }

  /** Sequences referencing a page. */
  refCount(page: number): number {
    return this.refs[page]!;
  }

  /** Whether a new sequence of `positions` fits now: its pages, and a state slot when the model has states. */
  canHold(positions: number): boolean {
    return this.pagesFor(positions) <= this.freePages && (!this.states || this.states.free > 0);
  }

  /** Pages a sequence of `positions` needs. */
  pagesFor(positions: number): number {
    return Math.ceil(positions / this.pageSize);
  }

  /** Takes n pages (one reference each), evicting unreferenced cached pages as needed, or none when fewer are left. */
  take(n: number): number[] | undefined {
    if (n > this.freePages) return undefined;
    if (n > this.free.length) this.free.unshift(...this.prefixCache!.evict(n - this.free.length).reverse());
    const pages = this.free.splice(this.free.length - n, n).reverse();
    for (const p of pages) this.refs[p] = 1;
    return pages;
  }

  /** One more reference to a page some sequence holds or the prefix cache keeps. */
  share(page: number): void {
    if (this.refs[page]++ === 0) this.prefixCache?.referenced(page);
  }

  /**
   * Drops one reference to each page. A page nobody references goes back to the free list, or, when the prefix
   * cache holds it, in line for eviction; the last pages go first, so a sequence's tail is evicted before its head.
   */
  give(pages: readonly number[]): void {
    for (let i = pages.length - 1; i >= 0; i--) {
      const p = pages[i]!;
      if (this.refs[p] === 0) throw new Error(`PagedKvPool: page ${p} given back more often than taken`);
      if (--this.refs[p] > 0) continue;
      if (this.prefixCache?.holds(p)) this.prefixCache.unreferenced(p);
      else this.free.push(p);
    }
  }

  /** Copies page `from`'s keys and values (every layer) into page `to` (copy-on-write of a shared page). */
  copyPage(from: number, to: number): void {
    const rows = this.pageSize;
    tidy(() => {
      for (const t of [...this.keys, ...this.values]) {
        // Through a copy: one dispatch may not read and write the same buffer.
        copyInto(narrow(t, 0, to * rows, rows), clone(narrow(t, 0, from * rows, rows)));
      }
    });
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

  /**
   * Starts an empty sequence with cached pages (a prefix-cache hit), one reference each; reserve then adds the rest.
   */
  adopt(pages: readonly number[]): void {
    if (this.pages.length > 0) throw new Error('PagedSequence.adopt: the sequence already holds pages');
    for (const p of pages) this.pool.share(p);
    this.pages.push(...pages);
  }

  /**
   * Replaces page i, shared with other sequences or the prefix cache, by a private copy before it is written
   * (copy-on-write); false when no page is free.
   */
  copyOnWrite(i: number): boolean {
    const old = this.pages[i]!;
    if (this.pool.refCount(old) === 1 && !this.pool.prefixCache?.holds(old)) return true;
    const fresh = this.pool.take(1);
    if (!fresh) return false;
    this.pool.copyPage(old, fresh[0]!);
    this.pages[i] = fresh[0]!;
    this.pool.give([old]);
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
