// Sample j of STFT frame f = row mod R1 of signal b = row / R1 (x [B, T], any strides), times the window: position
// f hop - pad_left + j, outside [0, T) mirrored without repeating the edge (PAD 1, reflect; the op checks the pad
// is shorter than the signal) or zero (PAD 0). The padded signal never exists.
fn load_input(row: u32, j: u32) -> vec2<f32> {
  let b = row / p.r1;
  let f = row % p.r1;
  let t = i32(p.t_len);
  var pos = i32(f * p.hop + j) - i32(p.pad_left);
  if (pos < 0 || pos >= t) {
    if (PAD == 0u) {
      return vec2<f32>(0.0);
    }
    pos = select(2 * (t - 1) - pos, -pos, pos < 0);
  }
  return vec2<f32>(load_x(p.x_off + b * p.x_s0 + u32(pos) * p.x_sj) * load_window(p.w_off + j * p.w_s), 0.0);
}
