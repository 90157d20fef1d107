// The Gated DeltaNet states of every running sequence for continuous batching: per DeltaNet layer one conv-window
// pool [slots, Hv, K-1, 2 dk + dv] and one recurrent-state pool [slots, Hv, dk, dv] (float32), and a free list of
// slots on the host. A sequence takes a slot when it is admitted (zeroed: a new sequence's state) and gives it back
// when it ends or is preempted (a preempted sequence recomputes its state from its tokens, as it does its KV rows).
// Past the sequence slots lie the snapshot slots the prefix cache keeps a state in at a page boundary
// (models/layers/prefix-cache.ts), so a sequence that shares a cached prefix restarts from the state there.
import type { DeviceName } from '../../runtime/backend.js';
import { keep } from '../../core/scope.js';
import type { Tensor } from '../../core/tensor.js';
import { zeros } from '../../ops/creation.js';
import { gatedDeltaNetStateBytes, type GatedDeltaNetGeometry, type GatedDeltaNetState } from '../../ops/gated-delta-net.js';
import { select } from '../../ops/shape-ops.js';
import { StateSlotPool } from '../layers/state-slot-pool.js';

export class DeltaNetStateSlots extends StateSlotPool {
  /** Per DeltaNet layer (in layer order), every slot's conv window and recurrent state. */
  readonly conv: Tensor[];
  readonly recurrent: Tensor[];
  readonly scratchSlot: number;

  constructor(
    layers: number,
    readonly geometry: GatedDeltaNetGeometry,
    slots: number,
    device: DeviceName,
    snapshotSlots = 0,
  ) {
    super('DeltaNetStateSlots', slots, snapshotSlots);
    const g = geometry;
    const all = slots + snapshotSlots;
    this.scratchSlot = all;
    // One more slot past the snapshots: the scratch slot of a captured batched step's padding rows (several padding
    // rows share it; what they leave there is never read by a sequence).
    this.conv = Array.from({ length: layers }, () => keep(zeros([all + 1, g.valueHeads, g.convKernel - 1, 2 * g.keyDim + g.valueDim], { device })));
    this.recurrent = Array.from({ length: layers }, () => keep(zeros([all + 1, g.valueHeads, g.keyDim, g.valueDim], { device })));
  }

  protected get pools(): readonly Tensor[] {
    return [...this.conv, ...this.recurrent];
  }

  /** Bytes of every slot's state (snapshot slots included). */
  get bytes(): number {
    return (this.slots + this.snapshotSlots) * this.conv.length * gatedDeltaNetStateBytes(this.geometry);
  }

  /** Layer `layer`'s (its index among the DeltaNet layers) state of one slot, as views (dispose them, or use tidy). */
  state(layer: number, slot: number): GatedDeltaNetState {
    return { conv: select(this.conv[layer], 0, slot), recurrent: select(this.recurrent[layer], 0, slot) };
  }
}
