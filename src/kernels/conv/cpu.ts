// The float64 reference of conv (conv1d / conv2d / conv3d as one 3-D form): the oracle its WebGPU kernels are tested against.
import type { StorageArray } from '../../core/codecs.js';
import { numel, type Shape } from '../../core/shape.js';
import type { ConvGeometry, Operand } from '../../runtime/backend.js';
import { store, values } from '../../runtime/cpu/cpu-backend.js';

type Handle = StorageArray;

/**
 * F.conv3d on [N, C, T, H, W] with zero padding read through bounds checks (see Backend.conv); time positions in
 * [-P, 0) read the P frames of previous.
 */
export function convReference(
  x: Operand<Handle>,
  weight: Operand<Handle>,
  bias: Operand<Handle> | undefined,
  g: ConvGeometry,
  outShape: Shape,
  previous?: Operand<Handle>,
): Handle {
  const [n, c, t, h, w] = x.view.shape;
  const np = previous ? previous.view.shape[2] : 0;
  const [o, cg, kt, kh, kw] = weight.view.shape;
  const [, , to, ho, wo] = outShape;
  const og = o / g.groups;
  const xs = values(x);
  const ps = previous ? values(previous) : new Float64Array(0);
  const ws = values(weight);
  const bs = bias ? values(bias) : undefined;
  const out = new Float64Array(numel(outShape));
  let at = 0;
  for (let ni = 0; ni < n; ni++) {
    for (let oi = 0; oi < o; oi++) {
      const c0 = Math.floor(oi / og) * cg;
      for (let ti = 0; ti < to; ti++) {
        for (let hi = 0; hi < ho; hi++) {
          for (let wi = 0; wi < wo; wi++) {
            let acc = bs ? bs[oi] : 0;
            for (let ci = 0; ci < cg; ci++) {
              for (let a = 0; a < kt; a++) {
                const tx = ti * g.stride[0] - g.padBefore[0] + a * g.dilation[0];
                if (tx < -np || tx >= t) continue;
                // Frame tx of the virtual input cat(previous, x): contiguous source, base index and frame count.
                const [src, frame, frames] = tx < 0 ? [ps, np + tx, np] : [xs, tx, t];
                for (let b = 0; b < kh; b++) {
                  const hx = hi * g.stride[1] - g.padBefore[1] + b * g.dilation[1];
                  if (hx < 0 || hx >= h) continue;
                  for (let k = 0; k < kw; k++) {
                    const wx = wi * g.stride[2] - g.padBefore[2] + k * g.dilation[2];
                    if (wx < 0 || wx >= w) continue;
                    const xv = src[(((ni * c + c0 + ci) * frames + frame) * h + hx) * w + wx];
                    const wv = ws[(((oi * cg + ci) * kt + a) * kh + b) * kw + k];
                    acc += xv * wv;
                  }
                }
              }
            }
            out[at++] = acc;
          }
        }
      }
    }
  }
  return store(out, x.dtype);
}
