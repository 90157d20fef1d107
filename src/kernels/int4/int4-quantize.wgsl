// A float weight [R, K] quantized to packed 4 bits in groups of g columns, one invocation per group: affine min/max
// quantization as GPTQ's quantizer does it (the range always holds 0; scale (max - min) / 15, an integer zero point
// round(-min / scale), codes clamp(round(x / scale) + zero, 0, 15)). Writes the group's g / 8 words, its float32
// scale and its zero as an int32 (cast to uint8 by the caller: packed uint8 words would be shared by 4 groups).
// The header (params, bindings, load_x, the threads loop) comes from webgpu.ts.

fn quantize_group(t: u32) {
  let r = t / p.groups;
  let g = t % p.groups;
  let base = p.x_off + r * p.k + g * p.group;
  var lo = 0.0;
  var hi = 0.0;
  for (var i = 0u; i < p.group; i++) {
    let v = load_x(base + i);
    lo = min(lo, v);
    hi = max(hi, v);
  }
  var s = (hi - lo) / 15.0;
  if (s == 0.0) {
    s = 1.0;
  }
  let z = clamp(round(-lo / s), 0.0, 15.0);
  for (var w = 0u; w < p.group / 8u; w++) {
    var word = 0u;
    for (var j = 0u; j < 8u; j++) {
      let q = clamp(round(load_x(base + w * 8u + j) / s) + z, 0.0, 15.0);
      word |= u32(q) << (j * 4u);
    }
    words_out[r * (p.k / 8u) + g * (p.group / 8u) + w] = word;
  }
  scale_out[t] = s;
  zero_out[t] = u32(z);
}
