// CPU reference of gatedDeltaNet: transformers' Qwen3_5MoeGatedDeltaNet after its projections, token by token (the
// recurrent form): conv1d + SiLU over the value head's q|k|v channels continued from its conv window, l2-normalised
// q (times 1/sqrt(dk)) and k, g = -exp(A_log) softplus(a + dt_bias), beta = sigmoid(b), the delta rule on the
// [dk, dv] state, and the gated RMSNorm w * norm(o) * silu(z). float64 math; the state is rounded to float32 after
// every token, as the stored state is between decode steps, so a prefill equals the same tokens one at a time.
// With segments, each sequence's rows continue its own slot of the state pools.
import type { StorageArray } from '../../core/codecs.js';
import type { GatedDeltaNetArgs } from './index.js';
import { values } from '../../runtime/cpu/cpu-backend.js';

type Handle = StorageArray;

const silu = (x: number) => x / (1 + Math.exp(-x));
/** torch.nn.functional.softplus (beta 1, threshold 20). */
export const softplus = (x: number) => (x > 20 ? x : Math.log1p(Math.exp(x)));
const L2_EPS = 1e-6;

export function gatedDeltaNetReference(a: GatedDeltaNetArgs<Handle>): Handle {
  const s = a.qkv.view.shape[0];
  const hv = a.valueHeads;
  const dv = a.valueDim;
  const out = new Float32Array(s * hv * dv);
  const inputs = {
    qkv: values(a.qkv),
    qkvWidth: a.qkv.view.shape[1],
    z: values(a.z),
    b: values(a.b),
    a: values(a.a),
    w: values(a.convWeight),
    aLog: values(a.aLog),
    dtBias: values(a.dtBias),
    normW: values(a.normWeight),
  };
  if (!a.segments) {
    sequence(a, inputs, out, 0, s, 0);
    return out;
  }
  const ix = values(a.segments.index);
  for (let i = 0; i < a.segments.count; i++) sequence(a, inputs, out, ix[3 * i], ix[3 * i + 1], ix[3 * i + 2]);
  return out;
}

interface Inputs {
  qkv: Float64Array;
  qkvWidth: number;
  z: Float64Array;
  b: Float64Array;
  a: Float64Array;
  w: Float64Array;
  aLog: Float64Array;
  dtBias: Float64Array;
  normW: Float64Array;
}

/** Rows first .. first + rows - 1, continuing the states of pool slot `slot` (0 without segments). */
function sequence(a: GatedDeltaNetArgs<Handle>, x: Inputs, out: Float32Array, first: number, rows: number, slot: number): void {
  const { keyHeads: hk, valueHeads: hv, keyDim: dk, valueDim: dv, eps } = a;
  const taps = a.convWeight.view.shape[1];
  const win = taps - 1;
  const width = 2 * dk + dv;
  const convState = a.convState.handle as Float32Array;
  const state = a.state.handle as Float32Array;
  const cs0 = a.convState.view.offset + slot * hv * win * width;
  const st0 = a.state.view.offset + slot * hv * dk * dv;
  const group = hv / hk;
  const q = new Float64Array(dk);
  const k = new Float64Array(dk);
  const v = new Float64Array(dv);
  const o = new Float64Array(dv);
  const col = new Float64Array(dk * dv);
  for (let h = 0; h < hv; h++) {
    const kh = Math.floor(h / group);
    // The head's conv channels: its key head's q and k, then its own v.
    const channel = (c: number) => (c < dk ? kh * dk + c : c < 2 * dk ? hk * dk + kh * dk + (c - dk) : 2 * hk * dk + h * dv + (c - 2 * dk));
    const stateAt = st0 + h * dk * dv;
    for (let i = 0; i < dk * dv; i++) col[i] = state[stateAt + i];
    const decayRate = -Math.exp(x.aLog[h]);
    for (let t = first; t < first + rows; t++) {
      for (let c = 0; c < width; c++) {
        const ch = channel(c);
        const input = x.qkv[t * x.qkvWidth + ch];
        const at = cs0 + h * win * width + c;
        let y = x.w[ch * taps + win] * input;
        for (let j = 0; j < win; j++) y += x.w[ch * taps + j] * convState[at + j * width];
        for (let j = 0; j + 1 < win; j++) convState[at + j * width] = convState[at + (j + 1) * width];
        if (win > 0) convState[at + (win - 1) * width] = input;
        const act = silu(y);
        if (c < dk) q[c] = act;
        else if (c < 2 * dk) k[c - dk] = act;
        else v[c - 2 * dk] = act;
      }
      let sq = 0;
      let sk = 0;
      for (let i = 0; i < dk; i++) {
        sq += q[i] * q[i];
        sk += k[i] * k[i];
      }
      const rq = 1 / Math.sqrt(sq + L2_EPS) / Math.sqrt(dk);
      const rk = 1 / Math.sqrt(sk + L2_EPS);
      for (let i = 0; i < dk; i++) {
        q[i] *= rq;
        k[i] *= rk;
      }
      const decay = Math.exp(decayRate * softplus(x.a[t * hv + h] + x.dtBias[h]));
      const beta = 1 / (1 + Math.exp(-x.b[t * hv + h]));
      for (let j = 0; j < dv; j++) {
        let kv = 0;
        for (let i = 0; i < dk; i++) kv += col[i * dv + j] * decay * k[i];
        const delta = (v[j] - kv) * beta;
        let acc = 0;
        for (let i = 0; i < dk; i++) {
          const next = Math.fround(col[i * dv + j] * decay + k[i] * delta);
          col[i * dv + j] = next;
          acc += next * q[i];
        }
        o[j] = acc;
      }
      let ss = 0;
      for (let j = 0; j < dv; j++) ss += o[j] * o[j];
      const r = 1 / Math.sqrt(ss / dv + eps);
      for (let j = 0; j < dv; j++) out[(t * hv + h) * dv + j] = Math.fround(x.normW[j] * o[j] * r * silu(x.z[t * hv * dv + h * dv + j]));
    }
    for (let i = 0; i < dk * dv; i++) state[stateAt + i] = col[i];
  }
}
