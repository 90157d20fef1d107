// The float64 reference of overlapAdd: the oracle its WebGPU kernel is tested against.
import type { StorageArray } from '../../core/codecs.js';
import type { Operand } from '../../runtime/backend.js';
import { store, values } from '../../runtime/cpu/cpu-backend.js';

type Handle = StorageArray;

export function overlapAddReference(frames: Operand<Handle>, window: Operand<Handle>, hop: number, padLeft: number, length: number): Handle {
  const [batch, count, nFft] = frames.view.shape;
  const fs = values(frames);
  const win = values(window);
  const out = new Float64Array(batch * length);
  for (let b = 0; b < batch; b++) {
    for (let t = 0; t < length; t++) {
      const p = t + padLeft;
      let sum = 0;
      let envelope = 0;
      // Frames f with 0 <= p - f * hop < nFft.
      const last = Math.min(count - 1, Math.floor(p / hop));
      for (let f = Math.max(0, Math.ceil((p - nFft + 1) / hop)); f <= last; f++) {
        const j = p - f * hop;
        sum += fs[(b * count + f) * nFft + j] * win[j];
        envelope += win[j] * win[j];
      }
      out[b * length + t] = envelope === 0 ? 0 : sum / envelope;
    }
  }
  return store(out, 'float32');
}
