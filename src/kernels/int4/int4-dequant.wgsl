// A packed 4-bit weight (formats/webgpu.ts: int32 words [R, K/8], column 8w + j of a row in bits 4j..4j+3 of word w;
// scale and zero [R, K/g]) as float32: one invocation per element, written to its activation column (perm[j] under
// act-order, else j). The header (params, bindings, load_scale/load_zero, the threads loop) comes from webgpu.ts.

fn dequant_at(e: u32) {
  let r = e / p.k;
  let j = e % p.k;
  let word = words[p.w_off + r * (p.k / 8u) + j / 8u];
  let q = f32((word >> ((j % 8u) * 4u)) & 15u);
  let g = r * p.groups + j / p.group;
  let v = (q - load_zero(p.z_off + g)) * load_scale(p.s_off + g);
  out[r * p.k + {{COLUMN}}] = v;
}
