// Attention backward, first pass: one workgroup of WG invocations per (query row i, query head h), over the keys the
// row sees (causal: j <= i + query_offset), in workgroup-strided chunks so any length works.
//   1. Invocation t streams keys t, t + WG, ... keeping an online softmax state (max m, sum l of exp(s - m), and
//      a = sum exp(s - m) dp with dp_ij = dO_i.v_j); a fixed tree merges the WG states, so the row's logsumexp
//      L_i = m + log(l) and D_i = a / l (= sum_j P_ij dp_ij = dO_i.O_i) come out the same bits on every run.
//   2. Per tile of WG keys, invocation t recomputes ds_ij = P_ij (dp_ij - D_i) with P_ij = exp(s_ij - L_i) into
//      workgroup memory, then every invocation adds ds_ij k_j into its own dims of dq_i.
// L and D ([Hq, Sq] float32) go to the second pass (attention-backward-dkv.wgsl). A NaN or +Inf score, or visible
// scores all -Inf, make L NaN (the forward's row is NaN), so the row's gradients are NaN; a row that sees no key
// gets dq = 0 and is never read by the second pass.
// The header (params, bindings, load_q/k/v/g, WG, the ROUNDS, DQ constants and reduce_row_state, the tree of
// workgroup-reduce.wgsl over merge_states) comes from attention-backward.ts.

var<workgroup> sh_q: array<f32, DQ>;
var<workgroup> sh_g: array<f32, DQ>;
var<workgroup> sh_ds: array<f32, WG>;

// An invocation's online state over its keys: max m, l = sum exp(s - m), a = sum exp(s - m) dp, and bad = 1 when
// it saw a NaN or +Inf score.
struct RowState {
  m: f32,
  l: f32,
  a: f32,
  bad: u32,
}

// Two states as one: both rescaled to the larger max (an empty state has m = -Inf and l = a = 0).
fn merge_states(x: RowState, y: RowState) -> RowState {
  let mx = max(x.m, y.m);
  var c1 = 0.0;
  var c2 = 0.0;
  if (mx != f32_bits(0xff800000u)) {
    c1 = exp_nonpos(x.m - mx);
    c2 = exp_nonpos(y.m - mx);
  }
  return RowState(mx, x.l * c1 + y.l * c2, x.a * c1 + y.a * c2, x.bad | y.bad);
}

// How many keys query i sees.
fn visible(i: u32) -> u32 {
  if (p.causal == 0u) {
    return p.skv;
  }
  return u32(clamp(i32(i) + p.query_offset + 1, 0, i32(p.skv)));
}

// (scale q_i.k_j, dO_i.v_j) for key j of kv head kh, q_i and dO_i in workgroup memory.
fn score_pair(j: u32, kh: u32) -> vec2<f32> {
  let k_row = p.k_off + j * p.ks0 + kh * p.ks1;
  let v_row = p.v_off + j * p.vs0 + kh * p.vs1;
  var s = 0.0;
  var dp = 0.0;
  for (var c = 0u; c < p.d; c++) {
    s += sh_q[c] * load_k(k_row + c * p.ks2);
    dp += sh_g[c] * load_v(v_row + c * p.vs2);
  }
  return vec2<f32>(p.scale * s, dp);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let wg_index = wid.x + wid.y * nwg.x;
  if (wg_index >= p.total_wg) {
    return;
  }
  let t = lid.x;
  let i = wg_index / p.hq;
  let h = wg_index % p.hq;
  let kh = h / p.group;
  let n = visible(i);
  for (var c = t; c < p.d; c += WG) {
    sh_q[c] = load_q(p.q_off + i * p.qs0 + h * p.qs1 + c * p.qs2);
    sh_g[c] = load_g(p.g_off + i * p.gs0 + h * p.gs1 + c * p.gs2);
  }
  workgroupBarrier();

  let neg_inf = f32_bits(0xff800000u);
  var m = neg_inf;
  var l = 0.0;
  var a = 0.0;
  var bad = false;
  for (var j = t; j < n; j += WG) {
    let sd = score_pair(j, kh);
    let s = sd.x;
    if (is_nan(s) || s == f32_bits(0x7f800000u)) {
      bad = true;
    } else if (s > m) {
      let corr = exp_nonpos(m - s);
      l = l * corr + 1.0;
      a = a * corr + sd.y;
      m = s;
    } else if (s != neg_inf) {
      let e = exp_nonpos(s - m);
      l += e;
      a += e * sd.y;
    }
  }
  let total = reduce_row_state(t, RowState(m, l, a, select(0u, 1u, bad)));
  let row_nan = total.bad != 0u || total.m == neg_inf;
  let lse_i = select(total.m + log(total.l), f32_bits(0x7fc00000u), row_nan);
  let delta_i = select(total.a / total.l, f32_bits(0x7fc00000u), row_nan);
  if (t == 0u) {
    lse[h * p.sq + i] = select(lse_i, neg_inf, n == 0u);
    delta[h * p.sq + i] = select(delta_i, 0.0, n == 0u);
  }

  var acc: array<f32, ROUNDS>;
  for (var r = 0u; r < ROUNDS; r++) {
    acc[r] = 0.0;
  }
  for (var tile = 0u; tile < n; tile += WG) {
    let j = tile + t;
    var ds = 0.0;
    if (j < n) {
      let sd = score_pair(j, kh);
      let pr = select(exp_nonpos(sd.x - lse_i), f32_bits(0x7fc00000u), row_nan);
      ds = pr * (sd.y - delta_i);
    }
    sh_ds[t] = ds;
    workgroupBarrier();
    let count = min(WG, n - tile);
    for (var jj = 0u; jj < count; jj++) {
      let dsj = sh_ds[jj];
      let k_row = p.k_off + (tile + jj) * p.ks0 + kh * p.ks1;
      for (var r = 0u; r < ROUNDS; r++) {
        let c = r * WG + t;
        if (c < p.d) {
          acc[r] += dsj * load_k(k_row + c * p.ks2);
        }
      }
    }
    workgroupBarrier();
  }
  let out_base = (i * p.hq + h) * p.d;
  for (var r = 0u; r < ROUNDS; r++) {
    let c = r * WG + t;
    if (c < p.d) {
      dq[out_base + c] = p.scale * acc[r];
    }
  }
}
