// CPU references of convolution and padding: float64 loops over the definitions, the oracle for the WGSL kernels.
import { allocStorage, type StorageArray } from '../../core/codecs.js';
import { numel, type Shape } from '../../core/shape.js';
import type { ConvGeometry, ConvTranspose1dGeometry, Operand, PadMode } from '../backend.js';
import { castCode } from '../../core/codecs.js';
import { store, values } from './cpu-backend.js';

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

/** F.pad over every dim (see Backend.pad): storage codes copied as they are, so every dtype and NaN payload survives. */
export function padReference(x: Operand<Handle>, before: readonly number[], outShape: Shape, mode: PadMode, value: number): Handle {
  const { shape, strides, offset } = x.view;
  const rank = shape.length;
  const total = numel(outShape);
  const out = allocStorage(x.dtype, total);
  // float32 moves as raw bits: a JS number would quiet a signaling NaN's payload.
  const asBits = (a: Handle) => (a instanceof Float32Array ? new Uint32Array(a.buffer, a.byteOffset, a.length) : a);
  const from = asBits(x.handle);
  const to = asBits(out);
  let fillCode = castCode(value, x.dtype);
  if (x.dtype === 'float32') fillCode = new Uint32Array(Float32Array.of(value).buffer)[0];
  const idx = new Array<number>(rank).fill(0);
  for (let e = 0; e < total; e++) {
    let off = offset;
    let inside = true;
    for (let d = 0; d < rank; d++) {
      let i = idx[d] - before[d];
      const size = shape[d];
      if (i < 0 || i >= size) {
        if (mode === 'constant') {
          inside = false;
          break;
        }
        i = mode === 'replicate' ? Math.min(Math.max(i, 0), size - 1) : i < 0 ? -i : 2 * (size - 1) - i;
      }
      off += i * strides[d];
    }
    to[e] = inside ? from[off] : fillCode;
    for (let d = rank - 1; d >= 0; d--) {
      if (++idx[d] < outShape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}
