// CPU reference of shortConv: the unfused chain it replaces (Bx = B * x, a depthwise causal conv1d over the state
// and the new tokens, C * conv), in float64 with each step's result rounded to float32 as separate ops would store it.
import type { StorageArray } from '../../core/codecs.js';
import type { ShortConvArgs } from './index.js';
import { values } from '../../runtime/cpu/cpu-backend.js';

type Handle = StorageArray;

export function shortConvReference(a: ShortConvArgs<Handle>): Handle {
  const s = a.bcx.view.shape[0];
  const [h, taps] = a.weight.view.shape;
  const x = values(a.bcx);
  const w = values(a.weight);
  const state = a.state.handle as Float32Array;
  const bias = a.bias ? values(a.bias) : undefined;
  const window = taps - 1;
  const out = new Float32Array(s * h);
  if (a.segments) {
    const seg = values(a.segments.index);
    for (let i = 0; i < a.segments.count; i++) {
      const [first, rows, slot] = [seg[3 * i]!, seg[3 * i + 1]!, seg[3 * i + 2]!];
      convRows(x.subarray(first * 3 * h, (first + rows) * 3 * h), w, state, a.state.view.offset + slot * window * h, bias, rows, h, taps, out, first * h);
    }
    return out;
  }
  convRows(x, w, state, a.state.view.offset, bias, s, h, taps, out, 0);
  return out;
}

/** One sequence's s rows of x [s, 3H] continuing the state at stateAt, into out from outAt. */
function convRows(
  x: Float64Array,
  w: ArrayLike<number>,
  state: Float32Array,
  stateAt: number,
  bias: ArrayLike<number> | undefined,
  s: number,
  h: number,
  taps: number,
  out: Float32Array,
  outAt: number,
): void {
  const window = taps - 1;
  // The state's rows followed by this call's Bx rows: conv row t reads rows t .. t + taps - 1.
  const bx = new Float32Array((window + s) * h);
  for (let k = 0; k < window; k++) for (let c = 0; c < h; c++) bx[k * h + c] = state[stateAt + k * h + c];
  for (let t = 0; t < s; t++) {
    for (let c = 0; c < h; c++) bx[(window + t) * h + c] = Math.fround(x[t * 3 * h + c] * x[t * 3 * h + 2 * h + c]);
  }
  for (let t = 0; t < s; t++) {
    for (let c = 0; c < h; c++) {
      let y = bias ? bias[c] : 0;
      for (let k = 0; k < taps; k++) y += w[c * taps + k] * bx[(t + k) * h + c];
      out[outAt + t * h + c] = Math.fround(x[t * 3 * h + h + c] * Math.fround(y));
    }
  }
  for (let k = 0; k < window; k++) for (let c = 0; c < h; c++) state[stateAt + k * h + c] = bx[(s + k) * h + c];
}
