// LFM2's short-conv states of every running sequence for continuous batching: per conv layer one pool
// [slots, L-1, H] of the last L-1 Bx rows (float32), and a free list of slots on the host. A sequence takes a slot
// when it is admitted (zeroed: a new sequence's state) and gives it back when it ends or is preempted (a preempted
// sequence recomputes it from its tokens, as it does its KV rows). A state is small (L-1 rows of H per layer), so
// the prefix cache's snapshot slots, past the sequence slots, cost little: a sequence that shares a cached prefix
// restarts from the conv state at that page boundary (models/layers/prefix-cache.ts).
import type { DeviceName } from '../../runtime/backend.js';
import { keep } from '../../core/scope.js';
import type { Tensor } from '../../core/tensor.js';
import { zeros } from '../../ops/creation.js';
import { StateSlotPool } from '../layers/state-slot-pool.js';

export class ConvStateSlots extends StateSlotPool {
  /** Per conv layer (in layer order), every slot's window of Bx rows. */
  readonly conv: Tensor[];
  readonly scratchSlot: number;

  constructor(
    layers: number,
    /** Rows of a window (L - 1) and channels (H). */
    readonly window: number,
    readonly channels: number,
    slots: number,
    device: DeviceName,
    snapshotSlots = 0,
  ) {
    super('ConvStateSlots', slots, snapshotSlots);
    const all = slots + snapshotSlots;
    this.scratchSlot = all;
    // One more slot past the snapshots: the scratch slot of a captured batched step's padding rows.
    this.conv = Array.from({ length: layers }, () => keep(zeros([all + 1, window, channels], { device })));
  }

  protected get pools(): readonly Tensor[] {
    return this.conv;
  }

  /** Bytes of one slot's state (every conv layer). */
  get bytesPerSlot(): number {
    return this.conv.length * this.window * this.channels * 4;
  }
}
