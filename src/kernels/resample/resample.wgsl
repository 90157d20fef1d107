// Polyphase resampling (torchaudio's sinc-interpolation resample as a strided correlation): output i of signal b
// is phase i mod P of frame i div P, sum_w kernel[phase, w] x[b, frame stride - pad_left + w]; samples outside the
// signal read 0 by bounds checks (torchaudio pads the signal with zeros first; here no padded copy exists).
fn resample_at(i: u32) {
  let b = i / p.length;
  let o = i % p.length;
  let phase = o % p.phases;
  let start = i32((o / p.phases) * p.stride) - i32(p.pad_left);
  var s = 0.0;
  for (var w = 0u; w < p.width; w++) {
    let pos = start + i32(w);
    if (pos >= 0 && pos < i32(p.t_len)) {
      s += kernel[phase * p.width + w] * load_x(p.x_off + b * p.x_s0 + u32(pos) * p.x_s1);
    }
  }
  out[i] = s;
}
