// Chunked Gated DeltaNet, pass 1 of 4: the causal conv + SiLU of q|k|v for every token at once, continued from the
// conv state (read here, rewritten by pass 3), l2-normalised q (times 1/sqrt(dk)) and k into the qk scratch, v into
// the vu scratch. One workgroup per item: the first head_rows * Hv items are (token t < head_rows, value head h),
// reading h's own conv window; the rest are (token, key head kh), writing v for kh's Hv/Hk value heads. Same
// arithmetic as the recurrent kernel's conv_step and norms (reduce_pair: the same tree, from workgroup-reduce.wgsl).

// Token t's conv output for input channel ch; tokens before this segment come from the window at conv_state[at]
// (rows `width` apart, oldest first). The current token's tap first, as the recurrent kernel sums.
fn conv_at(t: u32, ch: u32, at: u32, width: u32, win: u32) -> f32 {
  let w = p.w_off + ch * p.w_s0;
  var y = load_conv_w(w + win * p.w_s1) * load_qkv(p.qkv_off + t * p.qkv_s0 + ch);
  for (var j = 0u; j < win; j++) {
    let src = i32(t) - i32(win) + i32(j);
    var x: f32;
    if (src >= 0) {
      x = load_qkv(p.qkv_off + u32(src) * p.qkv_s0 + ch);
    } else {
      x = conv_state[at + u32(i32(win) + src) * width];
    }
    y += load_conv_w(w + j * p.w_s1) * x;
  }
  return silu(y);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let item = wid.x + wid.y * nwg.x;
  if (item >= p.items) {
    return;
  }
  let tid = lid.x;
  let group = p.hv / p.hk;
  let head_items = p.head_rows * p.hv;
  var t: u32;
  var h0: u32;
  var heads: u32;
  if (item < head_items) {
    t = item / p.hv;
    h0 = item % p.hv;
    heads = 1u;
  } else {
    let r = item - head_items;
    t = p.head_rows + r / p.hk;
    h0 = (r % p.hk) * group;
    heads = group;
  }
  let kh = h0 / group;
  let base = qk_base(t, h0);
  let width = 2u * p.dk + p.dv;
  let win = p.taps - 1u;
  let cs_head = p.cs_off + h0 * win * width;

  var sq = 0.0;
  var sk = 0.0;
  for (var c = tid; c < 2u * p.dk; c += WG) {
    let is_q = c < p.dk;
    let ch = select(p.hk * p.dk + kh * p.dk + (c - p.dk), kh * p.dk + c, is_q);
    let y = conv_at(t, ch, cs_head + c, width, win);
    qk[base + c] = y;
    sq += select(0.0, y * y, is_q);
    sk += select(y * y, 0.0, is_q);
  }
  for (var e = tid; e < heads * p.dv; e += WG) {
    let h = h0 + e / p.dv;
    let j = e % p.dv;
    vu[(t * p.hv + h) * p.dv + j] = conv_at(t, 2u * p.hk * p.dk + h * p.dv + j, p.cs_off + h * win * width + 2u * p.dk + j, width, win);
  }
  let sums = reduce_pair(tid, vec2<f32>(sq, sk));
  let rq = inverseSqrt(sums.x + 1e-6) * inverseSqrt(f32(p.dk));
  let rk = inverseSqrt(sums.y + 1e-6);
  // Each invocation rescales the values it wrote itself.
  for (var c = tid; c < 2u * p.dk; c += WG) {
    qk[base + c] *= select(rk, rq, c < p.dk);
  }
}
