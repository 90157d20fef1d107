// Whisper's mel projection and log, one invocation per output (mel m, frame f) of example b = workgroup_id.y:
// log10(max(sum_k filters[m, k] power[b, k, f], floor)), written to out; each workgroup also leaves the largest
// value it wrote (NaN if any was NaN) in partial_max for log-mel-normalize.wgsl, so the global max needs no
// read-back. Consecutive invocations read consecutive frames of power: coalesced.
@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let b = wid.y;
  let e = wid.x * WG + lid.x;
  let per = p.mels * p.frames;
  var y = f32_bits(0xff800000u);
  if (e < per) {
    let m = e / p.frames;
    let f = e % p.frames;
    var s = 0.0;
    // A mel filter covers a few bins: the op passes each one's nonzero range, so power is read ~10x less.
    let first = bands[2u * m];
    let end = bands[2u * m + 1u];
    for (var k = first; k < end; k++) {
      s += filters[p.fb_off + m * p.fb_s0 + k * p.fb_s1] * power[p.p_off + b * p.p_s0 + k * p.p_s1 + f * p.p_s2];
    }
    y = log2(max(s, p.floor)) * LOG10_2;
    if (is_nan(s)) {
      y = s;
    }
    out[b * per + e] = y;
  }
  let m = workgroup_max(lid.x, y);
  if (lid.x == 0u) {
    partial_max[b * p.chunks + wid.x] = m;
  }
}
