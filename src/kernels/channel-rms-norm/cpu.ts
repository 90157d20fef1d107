// CPU reference of channelRmsNorm: float64 loops over the definition. x arrives as a 5-D view [N, C, T, H, W];
// values() reads it in row-major order, so the loop indexes a contiguous [N, C, S] (S = T*H*W) array.
import type { StorageArray } from '../../core/codecs.js';
import { store, values } from '../../runtime/cpu/cpu-backend.js';
import type { ChannelRmsNormArgs } from './index.js';

type Handle = StorageArray;

export function channelRmsNormReference({ x, weight, eps, silu }: ChannelRmsNormArgs<Handle>): Handle {
  const [n, c, t, h, w] = x.view.shape;
  const s = t * h * w;
  const xs = values(x);
  const ws = weight ? values(weight) : undefined;
  const out = new Float64Array(xs.length);
  for (let ni = 0; ni < n; ni++) {
    for (let p = 0; p < s; p++) {
      let sq = 0;
      for (let ci = 0; ci < c; ci++) sq += xs[(ni * c + ci) * s + p] ** 2;
      const inv = 1 / Math.sqrt(sq / c + eps);
      for (let ci = 0; ci < c; ci++) {
        const i = (ni * c + ci) * s + p;
        const y = xs[i] * inv * (ws ? ws[ci] : 1);
        out[i] = silu ? y / (1 + Math.exp(-y)) : y;
      }
    }
  }
  return store(out, x.dtype);
}
