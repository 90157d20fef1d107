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
  // The state's rows followed by this call's Bx rows: conv row t reads rows t .. t + taps - 1.
  const bx = new Float32Array((window + s) * h);
  for (let k = 0; k < window; k++) for (let c = 0; c < h; c++) bx[k * h + c] = state[a.state.view.offset + k * h + c];
  for (let t = 0; t < s; t++) {
    for (let c = 0; c < h; c++) bx[(window + t) * h + c] = Math.fround(x[t * 3 * h + c] * x[t * 3 * h + 2 * h + c]);
  }
  for (let t = 0; t < s; t++) {
    for (let c = 0; c < h; c++) {
      let y = bias ? bias[c] : 0;
      for (let k = 0; k < taps; k++) y += w[c * taps + k] * bx[(t + k) * h + c];
      out[t * h + c] = Math.fround(x[t * 3 * h + h + c] * Math.fround(y));
    }
  }
  for (let k = 0; k < window; k++) for (let c = 0; c < h; c++) state[a.state.view.offset + k * h + c] = bx[(s + k) * h + c];
  return out;
}
