// Derivatives of the activations for their backward rules, g * f'(x), with the forward's NaN handling (the
// helpers of float-math.wgsl). silu' = s (1 + x (1 - s)); gelu' = Phi(x) + x phi(x); the tanh form
// differentiates 0.5 x (1 + tanh(k (x + 0.044715 x^3))).

fn g_silu(x: f32, g: f32) -> f32 {
  let s = 1.0 / (1.0 + exp_safe(-x));
  return g * s * (1.0 + x * (1.0 - s));
}

fn g_gelu(x: f32, g: f32) -> f32 {
  let cdf = 0.5 * erfc_approx(-x * 0.7071067811865476);
  let pdf = exp_safe(-0.5 * x * x) * 0.3989422804014327;
  return g * (cdf + x * pdf);
}

fn g_gelu_tanh(x: f32, g: f32) -> f32 {
  let k = 0.7978845608028654;
  let t = tanh_safe(k * (x + 0.044715 * x * x * x));
  return g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 0.134145 * x * x));
}
