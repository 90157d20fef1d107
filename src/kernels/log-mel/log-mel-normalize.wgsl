// The end of Whisper's log-mel, in place: each workgroup first reduces example b's partial maxima (from
// log-mel.wgsl) to its max, then raises its WG * ITEMS values (ITEMS per invocation: fewer workgroups repeat
// the reduction) to max - dynamic_range and maps y to (y + offset) / divisor. Every workgroup of b computes the
// same max in the same order.
@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let b = wid.y;
  var m = f32_bits(0xff800000u);
  for (var c = lid.x; c < p.chunks; c += WG) {
    m = nan_max(m, partial_max[b * p.chunks + c]);
  }
  let lower = workgroup_max(lid.x, m) - p.dynamic_range;
  let per = p.mels * p.frames;
  for (var e = wid.x * WG * ITEMS + lid.x; e < min(per, (wid.x + 1u) * WG * ITEMS); e += WG) {
    let y = out[b * per + e];
    var v = max(y, lower);
    if (is_nan(y) || is_nan(lower)) {
      v = f32_bits(0x7fc00000u);
    }
    out[b * per + e] = (v + p.offset) / p.divisor;
  }
}
