// remainder (Python's sign rule), fmod (C's) and floor_divide, as ATen computes them, for f32 and i32 compute. Only
// common.wgsl's helpers are used, so any compute type can include this file.

fn div_not_finite(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7f800000u) == 0x7f800000u;
}
// C's fmod, exact: WGSL's % is x - y * trunc(x / y), which rounds. Each step takes away |y| * 2^k with k the largest
// that fits; the two are within a factor of two of each other, so the subtraction is exact (Sterbenz).
fn fmod_f32(x: f32, y: f32) -> f32 {
  if (div_not_finite(x) || is_nan(y) || y == 0.0) {
    return f32_bits(0x7fc00000u);
  }
  if (div_not_finite(y)) {
    return x;
  }
  let ay = abs(y);
  var r = abs(x);
  for (var i = 0; i < 300 && r >= ay; i++) {
    var t = ldexp(ay, frexp(r).exp - frexp(ay).exp);
    if (t > r) {
      t = t * 0.5;
    }
    r = r - t;
  }
  return f32_bits(bitcast<u32>(r) | (bitcast<u32>(x) & 0x80000000u));
}
// torch.remainder (Python's sign rule): fmod, moved by y when the signs differ.
fn remainder_f32(x: f32, y: f32) -> f32 {
  let m = fmod_f32(x, y);
  return select(m, m + y, m != 0.0 && (y < 0.0) != (m < 0.0));
}
// torch.floor_divide on floats, ATen's div_floor_floating step by step (the quotient of x - fmod(x, y), rounded).
fn floor_divide_f32(x: f32, y: f32) -> f32 {
  if (y == 0.0) {
    return x / y;
  }
  let m = fmod_f32(x, y);
  var d = (x - m) / y;
  if (m != 0.0 && (y < 0.0) != (m < 0.0)) {
    d = d - 1.0;
  }
  if (d == 0.0) {
    return f32_bits(bitcast<u32>(x / y) & 0x80000000u);
  }
  var f = floor(d);
  if (d - f > 0.5) {
    f = f + 1.0;
  }
  return f;
}
// Integer forms. A zero divisor gives 0 here; the maps wrap the divisor in nonzero_i32 (device-error.ts), which
// reports it, so the next read back raises ZeroDivisionError as torch does.
fn fmod_i32(x: i32, y: i32) -> i32 {
  return select(x % select(y, 1, y == 0), 0, y == 0);
}
fn remainder_i32(x: i32, y: i32) -> i32 {
  let m = fmod_i32(x, y);
  return select(m, m + y, m != 0 && (y < 0) != (m < 0));
}
fn floor_divide_i32(x: i32, y: i32) -> i32 {
  if (y == 0) {
    return 0;
  }
  let q = x / y;
  return select(q, q - 1, x % y != 0 && (x < 0) != (y < 0));
}
