// SwiGLU's backward in one pass (swiglu-backward.ts): for a contiguous gate|up input x [rows, 2I] and the output's
// gradient g [rows, I] (float32), dx[r, i] = g b silu'(a) for the gate half and dx[r, I + i] = g silu(a) for the
// up half, a = x[r, i], b = x[r, I + i]; float32, as the composed rule (silu_grad map, two muls, silu, cat) gives
// in five dispatches. The header (params, bindings, load_x, encode_out, the word loop) comes from the description.

fn swiglu_backward_at(e: u32) -> f32 {
  let two = 2u * p.half;
  let row = e / two;
  let c = e - row * two;
  let i = select(c - p.half, c, c < p.half);
  let a = load_x(p.x_off + row * two + i);
  let b = load_x(p.x_off + row * two + p.half + i);
  let g = grad[p.g_off + row * p.half + i];
  // exp(NaN) is not NaN on every driver (SwiftShader: Inf): a NaN gate gives NaN through s.
  let s = select(1.0 / (1.0 + exp(-a)), a, is_nan(a));
  if (c < p.half) {
    return g * b * s * (1.0 + a * (1.0 - s));
  }
  return g * a * s;
}
