// A KV cache in fixed-size pages shared by every sequence (vLLM's PagedAttention layout): per layer one key pool and
// one value pool [pages * pageSize, kvHeads, headDim], a free list of page numbers on the host, and per sequence its
// page numbers (on the host too). A sequence takes pages as it grows and gives them all back when it ends, so memory
// follows the tokens actually held, not a worst case per slot. A batched forward uploads every row's position and
// its sequence's page table as one int32 index (ops/paged-cache.ts), shared by all layers.
import type { DeviceName } from '../../backends/backend.js';
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
  }
}

/** One sequence's pages in a pool, in order. */
export class PagedSequence {
  readonly pages: number[] = [];

  constructor(readonly pool: PagedKvPool) {}

  /** Makes room for `positions` in all; false (nothing taken) when the pool lacks the pages. */
  reserve(positions: number): boolean {
    const need = this.pool.pagesFor(positions) - this.pages.length;
    if (need <= 0) return true;
    const got = this.pool.take(need);
    if (!got) return false;
    this.pages.push(...got);
    return true;
  }

  /** Gives every page back. */
  release(): void {
    this.pool.give(this.pages);
    this.pages.length = 0;
  }
}

/** A sequence's part in a batched forward: `rows` tokens at positions start.. of its pages. */
export interface PagedSlot {
  readonly sequence: PagedSequence;
  readonly start: number;
  readonly rows: number;
}
