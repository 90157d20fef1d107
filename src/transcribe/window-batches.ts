// Whisper's encoder over several 30 s windows in one forward, ahead of the seeking that decides which windows are
// decoded. openai/whisper moves seek to a window's last timestamp, so the next window is known only once this one is
// decoded; a batch is therefore speculative: it holds the windows at fixed strides from the seek that asked for it,
// and a later seek uses one only when it lands exactly on its start (always without timestamps, where every window
// advances a whole window; with timestamps, after a window with no partial segment at its end, or one skipped as
// silence). A seek between the batch's starts drops the batch and encodes a new one from there: the transcript is
// the one-window-at-a-time one either way, only encoder work can be wasted.
import { tidy } from '../core/scope.js';
import type { Tensor } from '../core/tensor.js';
import { narrow, reshape } from '../ops/shape-ops.js';

export class WindowBatches {
  private ahead: { encoded: Tensor; seeks: number[] } | undefined;

  /**
   * `encode(seeks)` runs the encoder over the windows starting at those mel frames: [seeks.length, maxSource, d].
   * Batches hold up to `size` windows, `stride` frames apart, starting before `end` (the content's frames).
   */
  constructor(
    private readonly encode: (seeks: readonly number[]) => Tensor,
    readonly size: number,
    readonly stride: number,
    readonly end: number,
  ) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`batchWindows must be an integer >= 1, got ${size}`);
  }

  /** The encoder output [maxSource, d] of the window at `seek`: a view of its batch (the caller disposes the view). */
  at(seek: number): Tensor {
    let row = this.ahead?.seeks.indexOf(seek) ?? -1;
    if (row < 0) {
      this.dispose();
      const seeks: number[] = [];
      for (let s = seek; s < this.end && seeks.length < this.size; s += this.stride) seeks.push(s);
      if (seeks.length === 0) seeks.push(seek);
      this.ahead = { encoded: this.encode(seeks), seeks };
      row = 0;
    }
    const encoded = this.ahead!.encoded;
    // In a scope: the narrowed view would otherwise keep the whole batch's storage alive after the caller's dispose.
    return tidy(() => reshape(narrow(encoded, 0, row, 1), encoded.shape.slice(1)));
  }

  dispose(): void {
    this.ahead?.encoded.dispose();
    this.ahead = undefined;
  }
}
