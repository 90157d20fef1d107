// Online softmax state (running max m, sum s of exp(x - m)), shared by the one-pass and split-row kernels.

// exp that is exactly 0 far below the max (and for -Inf), whatever the GPU's exp does with huge negative inputs;
// NaN stays NaN.
fn exp_below_max(d: f32) -> f32 {
  return select(select(exp(d), 0.0, d < -88.0), d, is_nan(d));
}

// Merges two online-softmax states (m, s): s is the sum of exp(x - m). An empty state is (-Inf, 0).
fn merge(m1: f32, s1: f32, m2: f32, s2: f32) -> vec2<f32> {
  if (is_nan(m1) || is_nan(m2)) {
    return vec2<f32>(f32_bits(0x7fc00000u), 0.0);
  }
  let m = max(m1, m2);
  if (m == f32_bits(0xff800000u)) {
    return vec2<f32>(m, 0.0);
  }
  return vec2<f32>(m, s1 * exp_below_max(m1 - m) + s2 * exp_below_max(m2 - m));
}

// The row's sum, or NaN for rows of all -Inf (0/0) or with a NaN, as torch gives.
fn row_sum_or_nan(total: vec2<f32>) -> f32 {
  return select(total.y, f32_bits(0x7fc00000u), total.x == f32_bits(0xff800000u) || is_nan(total.x));
}
