// The float64 reference of convTranspose1d: the oracle its WebGPU kernel is tested against.
import type { StorageArray } from '../../core/codecs.js';
import { numel, type Shape } from '../../core/shape.js';
import type { ConvTranspose1dGeometry, Operand } from '../../runtime/backend.js';
import { store, values } from '../../runtime/cpu/cpu-backend.js';

type Handle = StorageArray;

/**
 * F.conv_transpose1d on [N, C, L] (see Backend.convTranspose1d): the gather over taps j whose input position
 * q = (t + padding - j*dilation) / stride is whole and inside x, summed in float64.
 */
export function convTranspose1dReference(
  x: Operand<Handle>,
  weight: Operand<Handle>,
  bias: Operand<Handle> | undefined,
  g: ConvTranspose1dGeometry,
  outShape: Shape,
): Handle {
  const [n, c, l] = x.view.shape;
  const [, og, k] = weight.view.shape;
  const [, o, lout] = outShape;
  const cg = c / g.groups;
  const xs = values(x);
  const ws = values(weight);
  const bs = bias ? values(bias) : undefined;
  const out = new Float64Array(numel(outShape));
  let at = 0;
  for (let ni = 0; ni < n; ni++) {
    for (let oi = 0; oi < o; oi++) {
      const c0 = Math.floor(oi / og) * cg;
      const oo = oi % og;
      for (let t = 0; t < lout; t++) {
        let acc = bs ? bs[oi] : 0;
        for (let j = 0; j < k; j++) {
          const s = t + g.padding - j * g.dilation;
          if (s < 0 || s % g.stride !== 0) continue;
          const q = s / g.stride;
          if (q >= l) continue;
          for (let ci = c0; ci < c0 + cg; ci++) acc += xs[(ni * c + ci) * l + q] * ws[(ci * og + oo) * k + j];
        }
        out[at++] = acc;
      }
    }
  }
  return store(out, x.dtype);
}
