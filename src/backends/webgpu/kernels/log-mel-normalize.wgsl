// The end of Whisper's log-mel, in place: each workgroup first reduces example b's partial maxima (from
// log-mel.wgsl) to its max, then raises its WG * ITEMS values (ITEMS per invocation: fewer workgroups repeat
// the reduction) to max - dynamic_range and maps y to
// (y + offset) / divisor. Every workgroup of b computes the same max in the same order.
var<workgroup> wmax: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let b = wid.y;
  var m = f32_bits(0xff800000u);
  for (var c = lid.x; c < p.chunks; c += WG) {
    let o = partial_max[b * p.chunks + c];
    m = select(max(m, o), select(m, o, is_nan(o)), is_nan(m) || is_nan(o));
  }
  wmax[lid.x] = m;
  workgroupBarrier();
  for (var span = WG / 2u; span > 0u; span /= 2u) {
    if (lid.x < span) {
      let o = wmax[lid.x + span];
      let a = wmax[lid.x];
      wmax[lid.x] = select(max(a, o), select(a, o, is_nan(o)), is_nan(a) || is_nan(o));
    }
    workgroupBarrier();
  }
  let lower = wmax[0] - p.dynamic_range;
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
