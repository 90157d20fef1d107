// CPU reference of logMel: the projection onto the mel filters, log10 with a floor, then each example's dynamic-range
// clamp and affine normalization, in float64 with the log rounded to float32 as the GPU's intermediate is.
import type { StorageArray } from '../../core/codecs.js';
import { store, values } from '../../runtime/cpu/cpu-backend.js';
import type { LogMelOperands } from './index.js';

type Handle = StorageArray;

export function logMelReference({ power, filters, args }: LogMelOperands<Handle>): Handle {
  const [batch, bins, frames] = power.view.shape;
  const [mels] = filters.view.shape;
  const ps = values(power);
  const fb = values(filters);
  const out = new Float64Array(batch * mels * frames);
  for (let b = 0; b < batch; b++) {
    let max = -Infinity;
    for (let m = 0; m < mels; m++) {
      for (let f = 0; f < frames; f++) {
        let s = 0;
        for (let k = 0; k < bins; k++) s += fb[m * bins + k] * ps[(b * bins + k) * frames + f];
        // float32 like the GPU's intermediate, so the max and the clamp see the same values.
        const y = Math.fround(Math.log10(Math.max(s, args.floor)));
        out[(b * mels + m) * frames + f] = y;
        max = Number.isNaN(y) || Number.isNaN(max) ? NaN : Math.max(max, y);
      }
    }
    const lower = max - args.dynamicRange;
    for (let i = b * mels * frames; i < (b + 1) * mels * frames; i++) out[i] = (Math.max(out[i], lower) + args.offset) / args.divisor;
  }
  return store(out, 'float32');
}
