// Float helpers for elementwise op expressions. WGSL has no erf, and tanh of large |x| can be NaN on some drivers
// (exp overflow). WGSL leaves log/sqrt/inverseSqrt indeterminate outside their domain and drivers differ
// (SwiftShader: log(x) is log|x|, log(0) is -88, exp(NaN) is Inf), so the IEEE results the CPU backend gives are
// spelled out here.

fn exp_safe(x: f32) -> f32 {
  return select(exp(x), x, is_nan(x));
}
fn log_safe(x: f32) -> f32 {
  if (is_nan(x) || x < 0.0) {
    return f32_bits(0x7fc00000u);
  }
  if (x == 0.0) {
    return f32_bits(0xff800000u);
  }
  return select(log(x), x, x == f32_bits(0x7f800000u));
}
fn sqrt_safe(x: f32) -> f32 {
  return select(sqrt(x), f32_bits(0x7fc00000u), is_nan(x) || x < 0.0);
}
fn rsqrt_safe(x: f32) -> f32 {
  if (is_nan(x) || x < 0.0) {
    return f32_bits(0x7fc00000u);
  }
  if (x == 0.0) {
    return f32_bits((bitcast<u32>(x) & 0x80000000u) | 0x7f800000u); // 1/sqrt(+-0) = +-Inf
  }
  return select(inverseSqrt(x), 0.0, x == f32_bits(0x7f800000u));
}
fn erfc_approx(x: f32) -> f32 {
  let z = abs(x);
  let t = 1.0 / (1.0 + 0.5 * z);
  let r = t * exp_safe(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 +
    t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return select(2.0 - r, r, x >= 0.0);
}
fn tanh_safe(x: f32) -> f32 {
  return select(tanh(clamp(x, -15.0, 15.0)), x, is_nan(x));
}
