// Chunked Gated DeltaNet, pass 3 of 4: the only sequential part, the state carried across chunks. One workgroup
// per (value head h, block of CB state columns): the delta rule never mixes state columns, so each block of
// S [dk, CB] (in workgroup memory for the whole pass) evolves on its own. Per chunk of len tokens, with pass 2's U,
// W, P and G:
//   V = U - W S                                  (invocation (r, c): row r, columns c = cq + 4 m)
//   o_r = exp(G_r) q_r S + sum_{s<=r} P[r][s] V_s (written to out, not yet normalised: pass 4 needs whole heads)
//   S = exp(G_last) S + sum_r exp(G_last - G_r) k_r V_r
// The workgroup of block 0 also rewrites the head's conv window from the last taps-1 inputs (pass 1 has read it).

var<workgroup> st: array<f32, DK_CB>;     // the state block, [dk][CB]
var<workgroup> vn: array<f32, C * CB>;    // V of the chunk, [C][CB]
var<workgroup> qd: array<f32, C>;         // exp(G_r)
var<workgroup> kd: array<f32, C>;         // exp(G_last - G_r)
var<workgroup> kbase: array<u32, C>;      // where k_r starts in the qk scratch

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let item = wid.x + wid.y * nwg.x;
  if (item >= p.hv * p.blocks) {
    return;
  }
  let h = item / p.blocks;
  let j0 = (item % p.blocks) * CB;
  let cols = min(CB, p.dv - j0);
  let tid = lid.x;
  let st_head = p.st_off + h * p.dk * p.dv;

  if (j0 == 0u) {
    let width = 2u * p.dk + p.dv;
    let win = p.taps - 1u;
    let kh = h / (p.hv / p.hk);
    for (var c = tid; c < width; c += WG) {
      var ch: u32;
      if (c < p.dk) {
        ch = kh * p.dk + c;
      } else if (c < 2u * p.dk) {
        ch = p.hk * p.dk + kh * p.dk + c - p.dk;
      } else {
        ch = 2u * p.hk * p.dk + h * p.dv + c - 2u * p.dk;
      }
      let at = p.cs_off + h * win * width + c;
      // New row j holds input s - win + j: from this segment, or (a segment shorter than the window) the old row
      // s + j, which is later than j and not yet overwritten.
      for (var j = 0u; j < win; j++) {
        let src = i32(p.s) - i32(win) + i32(j);
        var x: f32;
        if (src >= 0) {
          x = load_qkv(p.qkv_off + u32(src) * p.qkv_s0 + ch);
        } else {
          x = conv_state[at + (p.s + j) * width];
        }
        conv_state[at + j * width] = x;
      }
    }
  }

  for (var e = tid; e < p.dk * CB; e += WG) {
    let c = e % CB;
    st[e] = select(0.0, state[st_head + (e / CB) * p.dv + j0 + c], c < cols);
  }

  let r = tid % C;
  let cq = tid / C;
  let chunks = (p.s + C - 1u) / C;
  for (var n = 0u; n < chunks; n++) {
    let t0 = n * C;
    let len = min(C, p.s - t0);
    let g_last = wp[p.g_off + (t0 + len - 1u) * p.hv + h];
    if (tid < len) {
      let g = wp[p.g_off + (t0 + tid) * p.hv + h];
      qd[tid] = exp(g);
      kd[tid] = exp(g_last - g);
      kbase[tid] = qk_base(t0 + tid, h) + p.dk;
    }
    workgroupBarrier();  // also: st of the previous chunk complete

    var aw: array<f32, CB / 4u>;
    var aq: array<f32, CB / 4u>;
    for (var m = 0u; m < CB / 4u; m++) {
      aw[m] = 0.0;
      aq[m] = 0.0;
    }
    let t = t0 + r;
    if (r < len) {
      let w_row = (t * p.hv + h) * p.dk;
      let q_row = qk_base(t, h);
      for (var i = 0u; i < p.dk; i++) {
        let wv = wp[w_row + i];
        let qv = qk[q_row + i];
        for (var m = 0u; m < CB / 4u; m++) {
          let sv = st[i * CB + cq + 4u * m];
          aw[m] += wv * sv;
          aq[m] += qv * sv;
        }
      }
      for (var m = 0u; m < CB / 4u; m++) {
        let c = cq + 4u * m;
        var v = 0.0;
        if (c < cols) {
          v = vu[(t * p.hv + h) * p.dv + j0 + c] - aw[m];
        }
        vn[r * CB + c] = v;
      }
    }
    workgroupBarrier();

    if (r < len) {
      let p_row = p.p_off + ((n * p.hv + h) * C + r) * C;
      for (var m = 0u; m < CB / 4u; m++) {
        aq[m] *= qd[r];
      }
      for (var s = 0u; s <= r; s++) {
        let pv = wp[p_row + s];
        for (var m = 0u; m < CB / 4u; m++) {
          aq[m] += pv * vn[s * CB + cq + 4u * m];
        }
      }
      for (var m = 0u; m < CB / 4u; m++) {
        let c = cq + 4u * m;
        if (c < cols) {
          out[p.out_off + (t * p.hv + h) * p.dv + j0 + c] = aq[m];
        }
      }
    }

    let decay = exp(g_last);
    for (var e = tid; e < p.dk * CB; e += WG) {
      let i = e / CB;
      let c = e % CB;
      var acc = 0.0;
      for (var s = 0u; s < len; s++) {
        acc += qk[kbase[s] + i] * kd[s] * vn[s * CB + c];
      }
      st[e] = st[e] * decay + acc;
    }
    workgroupBarrier();  // st, vn, qd, kd are rewritten by the next chunk
  }

  for (var e = tid; e < p.dk * CB; e += WG) {
    let c = e % CB;
    if (c < cols) {
      state[st_head + (e / CB) * p.dv + j0 + c] = st[e];
    }
  }
}
