// CPU references of the VAE building blocks (group norm, RMS norm over channels, 2x upsampling): float64 loops over
// the definitions, the oracle for the WGSL kernels. x arrives as a 5-D view [N, C, T, H, W]; values() reads it in
// row-major order, so the loops below index a contiguous [N, C, S] (S = T*H*W) array.
import type { StorageArray } from '../../core/codecs.js';
import type { Operand, UpsampleMode } from '../backend.js';
import { store, values } from './cpu-backend.js';

type Handle = StorageArray;

export function groupNormReference(
  x: Operand<Handle>,
  numGroups: number,
  weight: Operand<Handle> | undefined,
  bias: Operand<Handle> | undefined,
  eps: number,
): Handle {
  const [n, c, t, h, w] = x.view.shape;
  const s = t * h * w;
  const cg = c / numGroups;
  const count = cg * s;
  const xs = values(x);
  const ws = weight ? values(weight) : undefined;
  const bs = bias ? values(bias) : undefined;
  const out = new Float64Array(xs.length);
  for (let ni = 0; ni < n; ni++) {
    for (let g = 0; g < numGroups; g++) {
      const base = (ni * c + g * cg) * s;
      let sum = 0;
      for (let i = 0; i < count; i++) sum += xs[base + i];
      const mean = sum / count;
      let sq = 0;
      for (let i = 0; i < count; i++) sq += (xs[base + i] - mean) ** 2;
      const rstd = 1 / Math.sqrt(sq / count + eps);
      for (let i = 0; i < count; i++) {
        const ci = g * cg + Math.floor(i / s);
        let y = (xs[base + i] - mean) * rstd;
        if (ws) y *= ws[ci];
        if (bs) y += bs[ci];
        out[base + i] = y;
      }
    }
  }
  return store(out, x.dtype);
}

export function channelRmsNormReference(x: Operand<Handle>, weight: Operand<Handle> | undefined, eps: number, silu: boolean): Handle {
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
