// Helpers of the elementwise math ops sin, cos, erf and sign, with the IEEE special cases the CPU backend and PyTorch
// give spelled out: WGSL leaves them to the driver. Only common.wgsl's helpers are used, so any compute type can
// include this file.

fn is_inf_or_nan(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7f800000u) == 0x7f800000u;
}
// sin and cos with our own range reduction: drivers' builtins are loose (SwiftShader errs by 1e-4 at |x| = 3 and
// gives 1 for sin(1e30)). x = k pi/2 + r with pi/2 in three parts (Cephes' sinf: k C1 is exact for k < 2^16), then
// Cephes' minimax polynomials on |r| <= pi/4. Beyond |x| = 1e5 the reduction loses bits (torch's CPU does Payne-Hanek
// there); the builtin is used.
fn sin_poly(r: f32) -> f32 {
  let z = r * r;
  return ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r;
}
fn cos_poly(r: f32) -> f32 {
  let z = r * r;
  return ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z - 0.5 * z + 1.0;
}
// sin(x + q pi/2) from the quadrant q (0..3) of x and its remainder r.
fn sin_quadrant(r: f32, q: i32) -> f32 {
  let s = select(cos_poly(r), sin_poly(r), (q & 1) == 0);
  return select(s, -s, (q & 2) != 0);
}
fn reduce_half_pi(x: f32) -> vec2<f32> {
  let k = round(x * 0.6366197723675814);
  let r = ((x - k * 1.5703125) - k * 4.837512969970703125e-4) - k * 7.54978995489188216e-8;
  return vec2<f32>(r, k);
}
fn sin_ieee(x: f32) -> f32 {
  if (is_inf_or_nan(x)) {
    return f32_bits(0x7fc00000u);
  }
  if (abs(x) > 1e5) {
    return sin(x);
  }
  let rk = reduce_half_pi(x);
  return sin_quadrant(rk.x, i32(rk.y) & 3);
}
fn cos_ieee(x: f32) -> f32 {
  if (is_inf_or_nan(x)) {
    return f32_bits(0x7fc00000u);
  }
  if (abs(x) > 1e5) {
    return cos(x);
  }
  let rk = reduce_half_pi(x);
  return sin_quadrant(rk.x, (i32(rk.y) + 1) & 3);
}
// erf(x): the Maclaurin series near 0, where 1 - erfc(x) would cancel, and 1 - erfc(x) elsewhere, erfc from
// Numerical Recipes' Chebyshev fit (float-math.wgsl's erfc_approx; fractional error below 1.2e-7).
fn erf_f32(x: f32) -> f32 {
  if (is_nan(x)) {
    return x;
  }
  if (abs(x) < 0.5) {
    let x2 = x * x;
    return 1.1283791670955126 * x * (1.0 + x2 * (-0.3333333333333333 + x2 * (0.1 + x2 * (-0.023809523809523808 + x2 * (0.004629629629629629 +
      x2 * (-0.0007575757575757576 + x2 * 0.00010683760683760684))))));
  }
  let z = abs(x);
  let t = 1.0 / (1.0 + 0.5 * z);
  let r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 +
    t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return select(r - 1.0, 1.0 - r, x >= 0.0);
}
// torch.sign: 0 for NaN (ATen's (0 < x) - (x < 0)).
fn sign_f32(x: f32) -> f32 {
  return select(0.0, 1.0, x > 0.0 && !is_nan(x)) - select(0.0, 1.0, x < 0.0 && !is_nan(x));
}

