// x ** y with C99 pow's special cases (PyTorch's, on every backend): y == 0 gives 1 (even for NaN x), x == 1 gives
// 1 (even for NaN y), a negative finite x with a finite non-integer y gives NaN, and zeros and infinities follow
// Annex F. WGSL's pow is undefined for x < 0 and drivers differ at 0 and Inf, so only |x| > 0 finite with y
// finite reaches the hardware: integer exponents below 2^24 by repeated squaring (exact for small powers, as
// x * x is), others as exp2(y * log2|x|).

fn pow_is_odd_integer(y: f32) -> bool {
  // Every float of magnitude >= 2^24 is an even integer.
  return abs(y) < 16777216.0 && floor(y) == y && (u32(abs(y)) & 1u) == 1u;
}

fn pow_f32(x: f32, y: f32) -> f32 {
  let inf = f32_bits(0x7f800000u);
  if (y == 0.0 || x == 1.0) {
    return 1.0;
  }
  if (is_nan(x) || is_nan(y)) {
    return f32_bits(0x7fc00000u);
  }
  let ax = abs(x);
  let odd = pow_is_odd_integer(y);
  let negative = bitcast<u32>(x) >= 0x80000000u;
  if (abs(y) == inf) {
    if (ax == 1.0) {
      return 1.0;
    }
    return select(0.0, inf, (ax > 1.0) == (y > 0.0));
  }
  if (ax == 0.0 || ax == inf) {
    // 0 ** y and Inf ** y are 0 or Inf; the sign survives only for odd integer y.
    let big = (ax == 0.0) == (y < 0.0);
    let magnitude = select(0.0, inf, big);
    return select(magnitude, -magnitude, negative && odd);
  }
  let integer = floor(y) == y;
  if (negative && !integer) {
    return f32_bits(0x7fc00000u);
  }
  var r: f32;
  if (integer && abs(y) < 16777216.0) {
    var base = select(ax, 1.0 / ax, y < 0.0);
    var e = u32(abs(y));
    r = 1.0;
    loop {
      if ((e & 1u) == 1u) {
        r *= base;
      }
      e >>= 1u;
      if (e == 0u) {
        break;
      }
      base *= base;
    }
  } else {
    r = exp2(y * log2(ax));
  }
  return select(r, -r, negative && odd);
}

// Integer power with int32 wrap-around (PyTorch's integer pow): a negative exponent gives 0 unless the base is 1
// or -1.
fn pow_i32(x: i32, y: i32) -> i32 {
  if (y < 0) {
    if (x == 1) {
      return 1;
    }
    if (x == -1) {
      return select(1, -1, (y & 1) == 1);
    }
    return 0;
  }
  var base = x;
  var e = u32(y);
  var r = 1;
  loop {
    if (e == 0u) {
      break;
    }
    if ((e & 1u) == 1u) {
      r *= base;
    }
    e >>= 1u;
    base *= base;
  }
  return r;
}
