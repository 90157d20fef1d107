// The float64 reference of upsample2x: the oracle its WebGPU kernel is tested against.
import type { StorageArray } from '../../core/codecs.js';
import type { Operand, UpsampleMode } from '../../runtime/backend.js';
import { store, values } from '../../runtime/cpu/cpu-backend.js';

type Handle = StorageArray;

/** Source index and upper-neighbour weight of output position o along a dim of `size` (bilinear, align_corners=false). */
function bilinearTap(o: number, size: number): [i0: number, i1: number, lambda: number] {
  const src = Math.max((o + 0.5) / 2 - 0.5, 0);
  const i0 = Math.floor(src);
  return [i0, Math.min(i0 + 1, size - 1), src - i0];
}

export function upsample2xReference(x: Operand<Handle>, mode: UpsampleMode): Handle {
  const [n, c, t, h, w] = x.view.shape;
  const ho = 2 * h;
  const wo = 2 * w;
  const xs = values(x);
  const planes = n * c * t;
  const out = new Float64Array(planes * ho * wo);
  let at = 0;
  for (let pl = 0; pl < planes; pl++) {
    const base = pl * h * w;
    for (let oh = 0; oh < ho; oh++) {
      for (let ow = 0; ow < wo; ow++) {
        if (mode === 'nearest') {
          out[at++] = xs[base + (oh >> 1) * w + (ow >> 1)];
          continue;
        }
        const [h0, h1, lh] = bilinearTap(oh, h);
        const [w0, w1, lw] = bilinearTap(ow, w);
        const top = (1 - lw) * xs[base + h0 * w + w0] + lw * xs[base + h0 * w + w1];
        const bottom = (1 - lw) * xs[base + h1 * w + w0] + lw * xs[base + h1 * w + w1];
        out[at++] = (1 - lh) * top + lh * bottom;
      }
    }
  }
  return store(out, x.dtype);
}
