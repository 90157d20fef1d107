// The Gated DeltaNet states of every running sequence for continuous batching: per DeltaNet layer one conv-window
// pool [slots, Hv, K-1, 2 dk + dv] and one recurrent-state pool [slots, Hv, dk, dv] (float32), and a free list of
// slots on the host. A sequence takes a slot when it is admitted (zeroed: a new sequence's state) and gives it back
// when it ends or is preempted (a preempted sequence recomputes its state from its tokens, as it does its KV rows).
// Past the sequence slots lie the snapshot slots the prefix cache keeps a state in at a page boundary
// (models/layers/prefix-cache.ts), so a sequence that shares a cached prefix restarts from the state there.
import type { DeviceName } from '../../runtime/backend.js';
import { keep, tidy } from '../../core/scope.js';
import type { Tensor } from '../../core/tensor.js';
import { zeros } from '../../ops/creation.js';
import { gatedDeltaNetStateBytes, type GatedDeltaNetGeometry, type GatedDeltaNetState } from '../../ops/gated-delta-net.js';
import { clone, copyInto, select } from '../../ops/shape-ops.js';
import type { SequenceStateSlots } from '../layers/paged-kv.js';

export class DeltaNetStateSlots implements SequenceStateSlots {
  /** Per DeltaNet layer (in layer order), every slot's conv window and recurrent state. */
  readonly conv: Tensor[];
  readonly recurrent: Tensor[];
  private readonly freeList: number[];
  private readonly freeSnapshotList: number[];

  constructor(
    layers: number,
    readonly geometry: GatedDeltaNetGeometry,
    readonly slots: number,
    device: DeviceName,
    /** Snapshot slots for the prefix cache (after the sequence slots). */
    readonly snapshotSlots = 0,
  ) {
    if (!Number.isInteger(slots) || slots <= 0) throw new RangeError(`DeltaNetStateSlots: slots must be a positive integer, got ${slots}`);
    if (!Number.isInteger(snapshotSlots) || snapshotSlots < 0)
      throw new RangeError(`DeltaNetStateSlots: snapshot slots must be a non-negative integer, got ${snapshotSlots}`);
    const g = geometry;
    const all = slots + snapshotSlots;
    this.conv = Array.from({ length: layers }, () => keep(zeros([all, g.valueHeads, g.convKernel - 1, 2 * g.keyDim + g.valueDim], { device })));
    this.recurrent = Array.from({ length: layers }, () => keep(zeros([all, g.valueHeads, g.keyDim, g.valueDim], { device })));
    this.freeList = Array.from({ length: slots }, (_, i) => slots - 1 - i);
    this.freeSnapshotList = Array.from({ length: snapshotSlots }, (_, i) => all - 1 - i);
  }

  get free(): number {
    return this.freeList.length;
  }

  get freeSnapshots(): number {
    return this.freeSnapshotList.length;
  }

  /** Bytes of every slot's state (snapshot slots included). */
  get bytes(): number {
    return (this.slots + this.snapshotSlots) * this.conv.length * gatedDeltaNetStateBytes(this.geometry);
  }

  take(): number | undefined {
    const slot = this.freeList.pop();
    if (slot === undefined) return undefined;
    tidy(() => {
      for (const t of [...this.conv, ...this.recurrent]) {
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

  /** Copies every layer's conv window and recurrent state of slot `from` into slot `to`. */
  copy(from: number, to: number): void {
    tidy(() => {
      // Through a copy: one dispatch may not read and write the same buffer.
      for (const t of [...this.conv, ...this.recurrent]) copyInto(select(t, 0, to), clone(select(t, 0, from)));
    });
  }

  /** Layer `layer`'s (its index among the DeltaNet layers) state of one slot, as views (dispose them, or use tidy). */
  state(layer: number, slot: number): GatedDeltaNetState {
    return { conv: select(this.conv[layer], 0, slot), recurrent: select(this.recurrent[layer], 0, slot) };
  }

  dispose(): void {
    for (const t of [...this.conv, ...this.recurrent]) t.dispose();
  }
}
