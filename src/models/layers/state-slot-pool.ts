// The bookkeeping the hybrid families' per-sequence state pools share (LFM2's conv windows, Qwen3.5's DeltaNet
// states): a free list of sequence slots and one of the prefix cache's snapshot slots past them, a slot zeroed when
// taken (a new sequence's state), copied slot to slot for snapshots, and the pool tensors ([slots, ...] each) the
// family allocates.
import { tidy } from '../../core/scope.js';
import type { Tensor } from '../../core/tensor.js';
import { zeros } from '../../ops/creation.js';
import { clone, copyInto, select } from '../../ops/shape-ops.js';
import type { SequenceStateSlots } from './paged-kv.js';

export abstract class StateSlotPool implements SequenceStateSlots {
  private readonly freeList: number[];
  private readonly freeSnapshotList: number[];

  protected constructor(
    what: string,
    readonly slots: number,
    /** Snapshot slots for the prefix cache (after the sequence slots). */
    readonly snapshotSlots: number,
  ) {
    if (!Number.isInteger(slots) || slots <= 0) throw new RangeError(`${what}: slots must be a positive integer, got ${slots}`);
    if (!Number.isInteger(snapshotSlots) || snapshotSlots < 0)
      throw new RangeError(`${what}: snapshot slots must be a non-negative integer, got ${snapshotSlots}`);
    const all = slots + snapshotSlots;
    this.freeList = Array.from({ length: slots }, (_, i) => slots - 1 - i);
    this.freeSnapshotList = Array.from({ length: snapshotSlots }, (_, i) => all - 1 - i);
  }

  /** Every pool tensor, slot-major ([slots, ...]). */
  protected abstract get pools(): readonly Tensor[];

  get free(): number {
    return this.freeList.length;
  }

  get freeSnapshots(): number {
    return this.freeSnapshotList.length;
  }

  take(): number | undefined {
    const slot = this.freeList.pop();
    if (slot === undefined) return undefined;
    tidy(() => {
      for (const t of this.pools) {
        const view = select(t, 0, slot);
        copyInto(view, zeros(view.shape, { device: t.device }));
      }
    });
    return slot;
  }

  give(slot: number): void {
    this.freeList.push(slot);
  }

  takeSnapshot(): number | undefined {
    return this.freeSnapshotList.pop();
  }

  giveSnapshot(slot: number): void {
    this.freeSnapshotList.push(slot);
  }

  /** Copies every pool's slot `from` into slot `to`. */
  copy(from: number, to: number): void {
    tidy(() => {
      // Through a copy: one dispatch may not read and write the same buffer.
      for (const t of this.pools) copyInto(select(t, 0, to), clone(select(t, 0, from)));
    });
  }

  dispose(): void {
    for (const t of this.pools) t.dispose();
  }
}
