// LFM2's short-conv states of every running sequence for continuous batching: per conv layer one pool
// [slots, L-1, H] of the last L-1 Bx rows (float32), and a free list of slots on the host. A sequence takes a slot
// when it is admitted (zeroed: a new sequence's state) and gives it back when it ends or is preempted (a preempted
// sequence recomputes it from its tokens, as it does its KV rows). A state is small (L-1 rows of H per layer), so
// the prefix cache's snapshot slots, past the sequence slots, cost little: a sequence that shares a cached prefix
// restarts from the conv state at that page boundary (models/layers/prefix-cache.ts).
import type { DeviceName } from '../../runtime/backend.js';
import { keep, tidy } from '../../core/scope.js';
import type { Tensor } from '../../core/tensor.js';
import { zeros } from '../../ops/creation.js';
import { clone, copyInto, select } from '../../ops/shape-ops.js';
import type { SequenceStateSlots } from '../layers/paged-kv.js';

export class ConvStateSlots implements SequenceStateSlots {
  /** Per conv layer (in layer order), every slot's window of Bx rows. */
  readonly conv: Tensor[];
  private readonly freeList: number[];
  private readonly freeSnapshotList: number[];
  readonly scratchSlot: number;

  constructor(
    layers: number,
    /** Rows of a window (L - 1) and channels (H). */
    readonly window: number,
    readonly channels: number,
    readonly slots: number,
    device: DeviceName,
    /** Snapshot slots for the prefix cache (after the sequence slots). */
    readonly snapshotSlots = 0,
  ) {
    if (!Number.isInteger(slots) || slots <= 0) throw new RangeError(`ConvStateSlots: slots must be a positive integer, got ${slots}`);
    if (!Number.isInteger(snapshotSlots) || snapshotSlots < 0)
      throw new RangeError(`ConvStateSlots: snapshot slots must be a non-negative integer, got ${snapshotSlots}`);
    const all = slots + snapshotSlots;
    this.scratchSlot = all;
    // One more slot past the snapshots: the scratch slot of a captured batched step's padding rows.
    this.conv = Array.from({ length: layers }, () => keep(zeros([all + 1, window, channels], { device })));
    this.freeList = Array.from({ length: slots }, (_, i) => slots - 1 - i);
    this.freeSnapshotList = Array.from({ length: snapshotSlots }, (_, i) => all - 1 - i);
  }

  get free(): number {
    return this.freeList.length;
  }

  get freeSnapshots(): number {
    return this.freeSnapshotList.length;
  }

  /** Bytes of one slot's state (every conv layer). */
  get bytesPerSlot(): number {
    return this.conv.length * this.window * this.channels * 4;
  }

  take(): number | undefined {
    const slot = this.freeList.pop();
    if (slot === undefined) return undefined;
    tidy(() => {
      for (const t of this.conv) {
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

  /** Copies every conv layer's window of slot `from` into slot `to`. */
  copy(from: number, to: number): void {
    tidy(() => {
      // Through a copy: one dispatch may not read and write the same buffer.
      for (const t of this.conv) copyInto(select(t, 0, to), clone(select(t, 0, from)));
    });
  }

  dispose(): void {
    for (const t of this.conv) t.dispose();
  }
}
