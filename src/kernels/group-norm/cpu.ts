// The float64 reference of groupNorm: loops over the definition, the oracle for its WGSL kernel. x arrives as a 5-D view [N, C, T, H, W]; values() reads it in
// row-major order, so the loops below index a contiguous [N, C, S] (S = T*H*W) array.
import type { StorageArray } from '../../core/codecs.js';
import type { Operand } from '../../runtime/backend.js';
import { store, values } from '../../runtime/cpu/cpu-backend.js';

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
