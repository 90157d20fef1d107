// The Gated DeltaNet's token mixing (Qwen3.5 / Qwen3.6's linear attention) composed from differentiable ops, for the
// training forward over a whole sequence from zero states: the causal depthwise conv + SiLU, l2-normalised q (times
// 1/sqrt(dk)) and k, g = -exp(A_log) softplus(a + dt_bias), beta = sigmoid(b), the gated delta rule in its chunked
// (WY / UT) form, and the gated RMSNorm w * norm(o) * silu(z). The inference op (ops/gated-delta-net.ts) computes
// the same in one or four dispatches but has no backward; this is what backward runs through.
//
// The chunked rule (Yang et al., "Gated Delta Networks", 2024; transformers' torch_chunk_gated_delta_rule): the
// sequence in chunks of C tokens, each head and chunk at once as [Hv, N, C, d] matmuls: the within-chunk decays from
// a cumulative sum (a matmul with a triangle of ones), the UT transform T = (I + strictly_lower(beta k k^T * decay))^-1
// by blocked doubling (log2 C steps of two matmuls, exact for the unit lower triangular matrix and as stable as
// forward substitution: every intermediate is a block of T itself, unlike a Neumann series whose powers can grow
// like binomials when keys repeat), then the state carried from chunk to chunk (a few matmuls per chunk). The
// dispatches grow with S / C, not with S.
import type { Tensor } from '../../core/tensor.js';
import { float32 } from '../../ops/grad-rules.js';
import { tensor, zeros } from '../../ops/creation.js';
import { rmsNorm } from '../../ops/nn.js';
import { cat } from '../../ops/shape-ops.js';

/** The chunk the rule uses at most (transformers' and the WebGPU prefill's). */
export const DELTA_RULE_CHUNK = 64;
const L2NORM_EPS = 1e-6;

/** x / sqrt(sum(x^2) + 1e-6) over the last dim (the l2norm of transformers' delta rules). */
export function l2norm(x: Tensor): Tensor {
  return x.mul(x.mul(x).sum(-1, { keepdim: true }).add(L2NORM_EPS).rsqrt());
}

/** softplus(x) = max(x, 0) + log(1 + exp(-|x|)): no overflow at any x, torch's value (threshold 20) to float32. */
export function softplus(x: Tensor): Tensor {
  return x.relu().add(x.abs().neg().exp().add(1).log());
}

/**
 * The causal depthwise conv over x [S, C] from zero history with taps [C, K] (conv1d.weight as [C, K], tap K-1 on
 * the current token, tap j on the token K-1-j back), float32, before its activation.
 */
export function causalConv(x: Tensor, taps: Tensor): Tensor {
  const [s, width] = x.shape;
  const k = taps.shape[1];
  const w = float32(taps);
  const padded = k > 1 ? cat([zeros([k - 1, width], { device: x.device }), float32(x)], 0) : float32(x);
  let out = padded.narrow(0, 0, s).mul(w.narrow(1, 0, 1).reshape(width));
  for (let j = 1; j < k; j++) out = out.add(padded.narrow(0, j, s).mul(w.narrow(1, j, 1).reshape(width)));
  return out;
}

/** [S, Hk, d] -> [S, Hk * rep, d], each key head repeated over its rep consecutive value heads (repeat_interleave). */
export function repeatHeads(x: Tensor, rep: number): Tensor {
  if (rep === 1) return x;
  const [s, h, d] = x.shape;
  return x
    .unsqueeze(2)
    .expand([s, h, rep, d])
    .reshape(s, h * rep, d);
}

/** A constant float32 [rows, cols] matrix with 1 where keep(i, j). */
function mask(device: Tensor['device'], rows: number, cols: number, keep: (i: number, j: number) => boolean): Tensor {
  const data = new Float32Array(rows * cols);
  for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) if (keep(i, j)) data[i * cols + j] = 1;
  return tensor(data, { shape: [rows, cols], device });
}

/**
 * (I + a)^-1 for a strictly lower triangular a [..., C, C], C a power of two, by blocked doubling: X holds the
 * inverses of the diagonal blocks of size b (X = I for b = 1); pairing blocks, [[A11, 0], [A21, A22]]^-1 is
 * [[X11, 0], [-X22 A21 X11, X22]], i.e. X - X (a restricted to the A21 blocks) X. log2(C) steps.
 */
export function unitLowerInverse(a: Tensor): Tensor {
  const c = a.shape[a.ndim - 1];
  let x: Tensor | undefined;
  for (let b = 1; b < c; b *= 2) {
    // Rows in the second half, columns in the first half, of the same block of 2b.
    const lowerLeft = mask(
      a.device,
      c,
      c,
      (i, j) => Math.floor(i / (2 * b)) === Math.floor(j / (2 * b)) && Math.floor(i / b) % 2 === 1 && Math.floor(j / b) % 2 === 0,
    );
    const a21 = a.mul(lowerLeft);
    x = x ? x.sub(x.matmul(a21).matmul(x)) : a21.neg().add(mask(a.device, c, c, (i, j) => i === j));
  }
  return x ?? a.mul(0).add(1); // C = 1: a is [.., 1, 1] zeros
}

/**
 * The gated delta rule from a zero state over a whole sequence: q, k [S, H, dk] (q already scaled), v [S, H, dv],
 * g (log decay, <= 0) and beta [S, H]; returns o [S, H, dv] float32 with o_t = S_t^T q_t, where
 * S_t = exp(g_t) S_{t-1} + k_t beta_t (v_t - exp(g_t) S_{t-1}^T k_t)^T. chunk: at most this many tokens per chunk
 * (a power of two; a short sequence takes the next power of two at or above its length).
 */
export function chunkedGatedDeltaRule(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, chunk = DELTA_RULE_CHUNK): Tensor {
  if (!Number.isInteger(Math.log2(chunk)) || chunk < 1) throw new RangeError(`chunkedGatedDeltaRule: the chunk must be a power of two, got ${chunk}`);
  const [s, h] = q.shape;
  const c = Math.min(chunk, 2 ** Math.ceil(Math.log2(s)));
  const n = Math.ceil(s / c);
  const pad = n * c - s;
  const device = q.device;
  // [S, H, d] -> [H, N, C, d]; the padded tokens (k = v = beta = g = 0) leave the state as it is.
  const heads = (t: Tensor) => {
    const d = t.shape[2];
    const ht = float32(t).transpose(0, 1);
    return (pad ? cat([ht, zeros([h, pad, d], { device })], 1) : ht).reshape(h, n, c, d);
  };
  const [qh, kh, vh] = [heads(q), heads(k), heads(v)];
  const betah = heads(beta.unsqueeze(2));
  // Cumulative log decay within each chunk: gc_i = g_0 + .. + g_i (a [C, C] triangle of ones).
  const gc = heads(g.unsqueeze(2))
    .reshape(h, n, c)
    .matmul(mask(device, c, c, (j, i) => j <= i));
  const lower = mask(device, c, c, (i, j) => j <= i);
  // exp(gc_i - gc_j) for j <= i, else 0 (the exponent zeroed first: above the diagonal it would be positive).
  const decay = gc.unsqueeze(3).sub(gc.unsqueeze(2)).mul(lower).exp().mul(lower);
  const kT = kh.transpose(-2, -1);
  const kBeta = kh.mul(betah);
  const t = unitLowerInverse(
    kBeta
      .matmul(kT)
      .mul(decay)
      .mul(mask(device, c, c, (i, j) => j < i)),
  );
  // WY form of the chunk: U = T (beta v) and W = T (beta k exp(gc)); from the state S entering the chunk the new
  // values are U - W S, the output q exp(gc) S + (q k^T * decay) (U - W S), and the state leaving it
  // exp(gc_last) S + (k exp(gc_last - gc))^T (U - W S).
  // (Only what the output uses is made: a tensor off the path to the loss would hold its tape until collected.)
  const u = t.matmul(vh.mul(betah));
  const intra = qh.matmul(kT).mul(decay);
  if (n === 1) return intra.matmul(u).reshape(h, c, -1).narrow(1, 0, s).transpose(0, 1);
  const expGc = gc.exp().unsqueeze(3);
  const w = t.matmul(kBeta.mul(expGc));
  const qDecayed = qh.mul(expGc);
  const last = gc.narrow(2, c - 1, 1);
  const kTail = kh.mul(last.sub(gc).exp().unsqueeze(3)).transpose(-2, -1).contiguous();
  const lastDecay = n > 2 ? last.exp().unsqueeze(3) : undefined; // the state decays from the third chunk on
  const outs: Tensor[] = [];
  let state: Tensor | undefined;
  for (let i = 0; i < n; i++) {
    const vNew = state ? u.select(1, i).sub(w.select(1, i).matmul(state)) : u.select(1, i);
    const o = intra.select(1, i).matmul(vNew);
    outs.push(state ? o.add(qDecayed.select(1, i).matmul(state)) : o);
    if (i + 1 < n) {
      const added = kTail.select(1, i).matmul(vNew);
      state = state ? state.mul(lastDecay!.select(1, i)).add(added) : added;
    }
  }
  return cat(outs, 1).narrow(1, 0, s).transpose(0, 1);
}

/** The rule one token at a time (the recurrent form, S steps of a few ops each): the chunked form's reference. */
export function recurrentGatedDeltaRule(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor): Tensor {
  const [s, h, dk] = q.shape;
  const dv = v.shape[2];
  let state = zeros([h, dk, dv], { device: q.device });
  const outs: Tensor[] = [];
  for (let t = 0; t < s; t++) {
    const kt = float32(k.select(0, t)).unsqueeze(2); // [H, dk, 1]
    const decayed = state.mul(float32(g.select(0, t)).exp().reshape(h, 1, 1));
    const kv = kt.transpose(-2, -1).matmul(decayed); // [H, 1, dv]
    const delta = float32(v.select(0, t))
      .unsqueeze(1)
      .sub(kv)
      .mul(float32(beta.select(0, t)).reshape(h, 1, 1));
    state = decayed.add(kt.matmul(delta));
    outs.push(float32(q.select(0, t)).unsqueeze(1).matmul(state)); // [H, 1, dv]
  }
  return cat(outs, 1).transpose(0, 1);
}

export interface DeltaNetMixing {
  readonly keyHeads: number;
  readonly valueHeads: number;
  readonly keyDim: number;
  readonly valueDim: number;
  readonly eps: number;
}

/**
 * The mixer between the projections and out_proj: qkv [S, 2 Hk dk + Hv dv], z [S, Hv dv], b and a [S, Hv] ->
 * the gated-normed output [S, Hv dv] float32. weights as the model keeps them (conv taps [C, K], A_log, dt_bias
 * and the plain norm weight).
 */
export function gatedDeltaNetMixing(
  inputs: { qkv: Tensor; z: Tensor; b: Tensor; a: Tensor },
  weights: { conv: Tensor; aLog: Tensor; dtBias: Tensor; norm: Tensor },
  geometry: DeltaNetMixing,
  options: { chunk?: number; recurrent?: boolean } = {},
): Tensor {
  const { keyHeads: hk, valueHeads: hv, keyDim: dk, valueDim: dv, eps } = geometry;
  const s = inputs.qkv.shape[0];
  const [keyWidth, valueWidth] = [hk * dk, hv * dv];
  const conv = causalConv(inputs.qkv, weights.conv).silu();
  const rep = hv / hk;
  const q = repeatHeads(l2norm(conv.narrow(1, 0, keyWidth).reshape(s, hk, dk)).mul(1 / Math.sqrt(dk)), rep);
  const k = repeatHeads(l2norm(conv.narrow(1, keyWidth, keyWidth).reshape(s, hk, dk)), rep);
  const v = conv.narrow(1, 2 * keyWidth, valueWidth).reshape(s, hv, dv);
  const beta = float32(inputs.b).sigmoid();
  const g = softplus(float32(inputs.a).add(float32(weights.dtBias))).mul(float32(weights.aLog).exp().neg());
  const o = options.recurrent ? recurrentGatedDeltaRule(q, k, v, g, beta) : chunkedGatedDeltaRule(q, k, v, g, beta, options.chunk);
  const gated = rmsNorm(o, float32(weights.norm), eps).mul(float32(inputs.z).reshape(s, hv, dv).silu());
  return gated.reshape(s, valueWidth);
}
