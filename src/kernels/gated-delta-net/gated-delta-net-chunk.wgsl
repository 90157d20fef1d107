// Chunked Gated DeltaNet, pass 2 of 4: everything inside one chunk of C tokens that does not depend on the state,
// in the WY / UT form of flash-linear-attention's chunk_gated_delta_rule (transformers'
// torch_chunk_gated_delta_rule). One workgroup per (chunk n, value head h), all of them independent. With
// G = the cumulative log decay g = -exp(A_log) softplus(a + dt_bias) inside the chunk and beta = sigmoid(b):
//   A[r][s] = beta_r exp(G_r - G_s) k_r . k_s   (s < r; the strictly lower triangle, in workgroup memory)
//   P[r][s] = exp(G_r - G_s) q_r . k_s          (s <= r; the intra-chunk attention, to the wp scratch)
//   (I + A) [U | W] = [beta v | beta exp(G) k]  (forward substitution: U over v in vu, W to the wp scratch)
// and G itself to the wp scratch. Rows past the end of a last partial chunk are neither computed nor written.
// Pass 3 carries the state across chunks with these.

var<workgroup> tile: array<f32, 2u * C * TI>;  // k and q tiles [C][TI] of the dot products, then A's lower triangle
var<workgroup> gcum: array<f32, C>;
var<workgroup> beta: array<f32, C>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let item = wid.x + wid.y * nwg.x;
  if (item >= p.chunks * p.hv) {
    return;
  }
  let n = item / p.hv;
  let h = item % p.hv;
  let tid = lid.x;
  let t0 = n * C;
  let len = min(C, p.s - t0);

  if (tid < C) {
    var g = 0.0;
    var b = 0.0;
    if (tid < len) {
      let t = t0 + tid;
      g = -exp(load_a_log(p.alog_off + h)) * softplus(load_a(p.a_off + t * p.a_s0 + h) + load_dt_bias(p.dt_off + h));
      b = 1.0 / (1.0 + exp(-load_b(p.b_off + t * p.b_s0 + h)));
    }
    gcum[tid] = g;
    beta[tid] = b;
  }
  workgroupBarrier();
  if (tid == 0u) {
    var acc = 0.0;
    for (var r = 0u; r < len; r++) {
      acc += gcum[r];
      gcum[r] = acc;
    }
  }
  workgroupBarrier();
  if (tid < len) {
    wp[p.g_off + (t0 + tid) * p.hv + h] = gcum[tid];
  }

  // Dot products k_r . k_s and q_r . k_s for s <= r: invocation (r, lane) takes s = lane + 4 m.
  let r = tid / 4u;
  let lane = tid % 4u;
  var kk: array<f32, C / 4u>;
  var qk_: array<f32, C / 4u>;
  for (var m = 0u; m < C / 4u; m++) {
    kk[m] = 0.0;
    qk_[m] = 0.0;
  }
  for (var i0 = 0u; i0 < p.dk; i0 += TI) {
    for (var e = tid; e < C * TI; e += WG) {
      let row = e / TI;
      let i = i0 + e % TI;
      var kv = 0.0;
      var qv = 0.0;
      if (row < len && i < p.dk) {
        let at = qk_base(t0 + row, h) + i;
        qv = qk[at];
        kv = qk[at + p.dk];
      }
      tile[e] = kv;
      tile[C * TI + e] = qv;
    }
    workgroupBarrier();
    if (r < len) {
      for (var m = 0u; m < C / 4u; m++) {
        let s = lane + 4u * m;
        if (s <= r) {
          var a = 0.0;
          var b = 0.0;
          for (var i = 0u; i < TI; i++) {
            let ks = tile[s * TI + i];
            a += tile[r * TI + i] * ks;
            b += tile[C * TI + r * TI + i] * ks;
          }
          kk[m] += a;
          qk_[m] += b;
        }
      }
    }
    workgroupBarrier();
  }
  let p_row = p.p_off + ((n * p.hv + h) * C + r) * C;
  if (r < len) {
    for (var m = 0u; m < C / 4u; m++) {
      let s = lane + 4u * m;
      if (s <= r) {
        let d = exp(gcum[r] - gcum[s]);
        if (s < r) {
          tile[r * (r - 1u) / 2u + s] = beta[r] * d * kk[m];
        }
        wp[p_row + s] = d * qk_[m];
      }
    }
  }
  workgroupBarrier();

  // One invocation per right-hand column (dk of W, then dv of U), rows in order: x_r = b_r - sum_{m<r} A[r][m] x_m.
  for (var col = tid; col < p.dk + p.dv; col += WG) {
    let is_w = col < p.dk;
    var x: array<f32, C>;
    for (var row = 0u; row < len; row++) {
      let t = t0 + row;
      var b: f32;
      if (is_w) {
        b = beta[row] * exp(gcum[row]) * qk[qk_base(t, h) + p.dk + col];
      } else {
        b = beta[row] * vu[(t * p.hv + h) * p.dv + col - p.dk];
      }
      let tri = row * (row - 1u) / 2u;
      for (var m = 0u; m < row; m++) {
        b -= tile[tri + m] * x[m];
      }
      x[row] = b;
      if (is_w) {
        wp[(t * p.hv + h) * p.dk + col] = b;
      } else {
        vu[(t * p.hv + h) * p.dv + col - p.dk] = b;
      }
    }
  }
}
