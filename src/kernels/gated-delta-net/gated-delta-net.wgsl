// One Gated DeltaNet layer after its projections, for S tokens in order: one workgroup per value head h (and, for a
// batch of sequences, per sequence: its rows and its slot of the state pools come from the segment index; its key
// head kh = h / (Hv / Hk)). Per token: the causal conv (K taps, the last on the current token) + SiLU of the head's
// 2 dk + dv channels (its key head's q and k, its own v), continued from the head's own window in conv_state
// [Hv, K-1, 2 dk + dv] (a private copy per value head, so no two workgroups write one slot); l2 norms of q and k (q
// also times 1/sqrt(dk)); g = -exp(A_log) softplus(a + dt_bias), beta = sigmoid(b); then the delta rule on the
// state [dk, dv]: invocation t owns columns j = t + r WG, decays its column, takes kv = S^T k, writes
// S += k (v - kv) beta and o_j = S^T q; last, the gated RMSNorm w_j o_j / rms(o) silu(z_j) over the head.
// The states are read and rewritten in place, so prefill and each decode step are this one dispatch.
// q|k|v, z, b and a are column ranges of one projection buffer (load_proj), A_log, dt_bias and the norm weight
// ranges of one parameter buffer (load_head): six bindings in all. The header (params, bindings, loads, WG, COLS =
// columns per invocation, MAX_QK, and reduce_pair: workgroup-reduce.wgsl's tree summing two values per invocation)
// comes from the description in webgpu.ts.

var<workgroup> qk: array<f32, MAX_QK>;  // q then k of the current token
// This workgroup's sequence: its first row, its rows and its slot in the state pools (SEGMENT fills them).
var<workgroup> sh_first: u32;
var<workgroup> sh_rows: u32;
var<workgroup> sh_slot: u32;

fn silu(x: f32) -> f32 {
  return x / (1.0 + exp(-x));
}

// torch's softplus (threshold 20).
fn softplus(x: f32) -> f32 {
  return select(log(1.0 + exp(x)), x, x > 20.0);
}

// Token s's conv output for input channel ch, whose window starts at conv_state[at] (rows `width` apart); the
// window then drops its oldest value and takes this token's input.
fn conv_step(s: u32, ch: u32, at: u32, width: u32, win: u32) -> f32 {
  let x = load_proj(p.qkv_off + s * p.qkv_s0 + ch);
  let w = p.w_off + ch * p.w_s0;
  var y = load_conv_w(w + win * p.w_s1) * x;
  for (var j = 0u; j < win; j++) {
    y += load_conv_w(w + j * p.w_s1) * conv_state[at + j * width];
  }
  for (var j = 0u; j + 1u < win; j++) {
    conv_state[at + j * width] = conv_state[at + (j + 1u) * width];
  }
  if (win > 0u) {
    conv_state[at + (win - 1u) * width] = x;
  }
  return silu(y);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let h = wid.x;
  let t = lid.x;
{{SEGMENT}}
  // Read from a buffer, the bounds must be made workgroup-uniform before the barriers in the token loop.
  let first = workgroupUniformLoad(&sh_first);
  let rows = workgroupUniformLoad(&sh_rows);
  let slot = workgroupUniformLoad(&sh_slot);
  let kh = h / (p.hv / p.hk);
  let width = 2u * p.dk + p.dv;
  let win = p.taps - 1u;
  let cs_head = p.cs_off + (slot * p.hv + h) * win * width;
  let st_head = p.st_off + (slot * p.hv + h) * p.dk * p.dv;
  let decay_rate = -exp(load_head(p.alog_off + h));
  let dt_bias = load_head(p.dt_off + h);
  for (var s = first; s < first + rows; s++) {
    var sq = 0.0;
    var sk = 0.0;
    for (var c = t; c < 2u * p.dk; c += WG) {
      let is_q = c < p.dk;
      let ch = select(p.hk * p.dk + kh * p.dk + (c - p.dk), kh * p.dk + c, is_q);
      let y = conv_step(s, ch, cs_head + c, width, win);
      qk[c] = y;
      sq += select(0.0, y * y, is_q);
      sk += select(y * y, 0.0, is_q);
    }
    var v: array<f32, COLS>;
    for (var r = 0u; r < COLS; r++) {
      let j = t + r * WG;
      if (j < p.dv) {
        v[r] = conv_step(s, 2u * p.hk * p.dk + h * p.dv + j, cs_head + 2u * p.dk + j, width, win);
      }
    }
    let sums = reduce_pair(t, vec2<f32>(sq, sk));
    let rq = inverseSqrt(sums.x + 1e-6) * inverseSqrt(f32(p.dk));
    let rk = inverseSqrt(sums.y + 1e-6);
    let decay = exp(decay_rate * softplus(load_proj(p.a_off + s * p.a_s0 + h) + dt_bias));
    let beta = 1.0 / (1.0 + exp(-load_proj(p.b_off + s * p.b_s0 + h)));
    workgroupBarrier();  // every invocation has read the sums before they are reused

    var o: array<f32, COLS>;
    var ss = 0.0;
    for (var r = 0u; r < COLS; r++) {
      let j = t + r * WG;
      if (j < p.dv) {
        var kv = 0.0;
        for (var i = 0u; i < p.dk; i++) {
          kv += state[st_head + i * p.dv + j] * qk[p.dk + i];
        }
        let delta = (v[r] - kv * decay * rk) * beta;
        var acc = 0.0;
        for (var i = 0u; i < p.dk; i++) {
          let at = st_head + i * p.dv + j;
          let next = state[at] * decay + qk[p.dk + i] * rk * delta;
          state[at] = next;
          acc += next * qk[i];
        }
        o[r] = acc * rq;
        ss += o[r] * o[r];
      }
    }
    let rn = inverseSqrt(reduce_pair(t, vec2<f32>(ss, 0.0)).x / f32(p.dv) + p.eps);
    for (var r = 0u; r < COLS; r++) {
      let j = t + r * WG;
      if (j < p.dv) {
        let zj = load_proj(p.z_off + s * p.z_s0 + h * p.dv + j);
        out[(s * p.hv + h) * p.dv + j] = load_head(p.nw_off + j) * o[r] * rn * silu(zj);
      }
    }
    workgroupBarrier();  // q, k and the sums of this token are read before the next token writes them
  }
}
