// The attention inputs of one layer from its fused q|k|v projection, in one dispatch: per head row, Qwen3's
// RMSNorm (HF rounding: the normalized value in the activation dtype, then the weight), rotate-half RoPE (of the
// first R = 2 p.rot_half dims; R < D is partial rotary) at position pos + s, q written to `out` [S, Hq, D], k and
// v written into the KV caches at row pos + s.
// One workgroup per (token s, head slot j): j < Hq a q head, then Hkv k heads, then Hkv v heads (copied as is).
// pos = p.pos0 + s + the position buffer's value (a captured decode step advances it without new uniforms), or with
// a paged cache token s's entry in the batch index; a row at or past the cache's capacity or the RoPE table's end
// writes nothing.
// The header (params, bindings, load_qkv/qn/kn, encode_out/k_cache/v_cache, round_x, WG = 64, MAX_D >= D and each
// output's LANES / BITS) comes from the description in attention-inputs.ts; POSITION, NORMALIZE, CACHE_ROW (a
// position's cache row: itself, or through a paged cache's page table) and K_WRITE / V_WRITE (a row's words from
// `first` on: packed codes, or an FP8 cache's scaled row, core/kv-fp8.ts) are its code.

var<workgroup> row: array<f32, MAX_D>;
var<workgroup> red: array<f32, WG>;
var<workgroup> sh_pos: u32;

{{CACHE_ROW}}

// Token s's position (paged: from the batch index, which also sets table_at, where its page table starts).
fn position(s: u32) -> u32 {
  return {{POSITION}};
}

// Rotate-half RoPE of element c of the (normalized) row at table row t, over the first 2 * p.rot_half dims (all of
// them, or partial rotary); the dims past them pass through.
fn roped(c: u32, t: u32) -> f32 {
  let half = p.rot_half;
  if (c >= 2u * half) {
    return row[c];
  }
  let i = c % half;
  let cs = cos_t[p.cos_off + t * p.cs0 + i];
  let sn = sin_t[p.sin_off + t * p.ss0 + i];
  if (c < half) {
    return row[c] * cs - row[c + half] * sn;
  }
  return row[c] * cs + row[i] * sn;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let index = wid.x + wid.y * nwg.x;
  if (index >= p.total) {
    return;
  }
  let t = lid.x;
  let slots = p.heads + 2u * p.kv_heads;
  let s = index / slots;
  let j = index % slots;
  if (t == 0u) {
    sh_pos = position(s);
  }
  // Read from a buffer, the position must be made workgroup-uniform before the barriers below depend on it.
  let pos = workgroupUniformLoad(&sh_pos);
{{TABLE_AT}}
  let is_q = j < p.heads;
  let is_v = j >= p.heads + p.kv_heads;
  // Caches and tables only have rows below their lengths; q rows past them are left unwritten too.
  if (pos >= p.capacity || pos >= p.table_len) {
    return;
  }
  let base = p.qkv_off + s * p.qkv_s0 + j * p.d;
  var sum_sq = 0.0;
  for (var c = t; c < p.d; c += WG) {
    let x = load_qkv(base + c);
    row[c] = x;
    sum_sq += x * x;
  }
  if (!is_v) {
    {{NORMALIZE}}
  }
  workgroupBarrier();
  if (is_q) {
    let first = (s * p.heads + j) * p.d;
    for (var w = t; w * Q_LANES < p.d; w += WG) {
      var word = 0u;
      for (var l = 0u; l < Q_LANES; l++) {
        word |= encode_out(roped(w * Q_LANES + l, pos)) << (l * Q_BITS);
      }
      out[first / Q_LANES + w] = word;
    }
  } else if (!is_v) {
    let first = p.k_off + cache_row(pos) * p.ks0 + (j - p.heads) * p.ks1;
{{K_WRITE}}
  } else {
    let first = p.v_off + cache_row(pos) * p.vs0 + (j - p.heads - p.kv_heads) * p.vs1;
{{V_WRITE}}
  }
}
