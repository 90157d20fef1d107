// 64-bit two's complement integers as vec2<u32> (x: low word, y: high word), the order they sit in storage.
// WGSL has no 64-bit types; these helpers use only 32-bit integer operations, so every result is exact and wraps
// modulo 2^64 as torch's int64 does. Shifts stay below 32 (WGSL shifts by >= 32 are invalid).

fn i64_add(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let lo = a.x + b.x;
  return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}

fn i64_neg(a: vec2<u32>) -> vec2<u32> {
  return i64_add(~a, vec2<u32>(1u, 0u));
}

fn i64_sub(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  return i64_add(a, i64_neg(b));
}

// The full 64-bit product of two u32, from 16-bit limbs (no partial sum passes 2^32).
fn u32_mul_wide(a: u32, b: u32) -> vec2<u32> {
  let a0 = a & 0xffffu;
  let a1 = a >> 16u;
  let b0 = b & 0xffffu;
  let b1 = b >> 16u;
  let p00 = a0 * b0;
  let p01 = a0 * b1;
  let p10 = a1 * b0;
  let p11 = a1 * b1;
  let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
  return vec2<u32>((p00 & 0xffffu) | (mid << 16u), p11 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}

// a * b mod 2^64: the cross terms only reach the high word (their own high halves fall off the top).
fn i64_mul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let w = u32_mul_wide(a.x, b.x);
  return vec2<u32>(w.x, w.y + a.x * b.y + a.y * b.x);
}

fn i64_lt(a: vec2<u32>, b: vec2<u32>) -> bool {
  let ah = bitcast<i32>(a.y);
  let bh = bitcast<i32>(b.y);
  return ah < bh || (ah == bh && a.x < b.x);
}

fn i64_eq(a: vec2<u32>, b: vec2<u32>) -> bool {
  return a.x == b.x && a.y == b.y;
}

fn i64_from_i32(v: i32) -> vec2<u32> {
  return vec2<u32>(bitcast<u32>(v), select(0u, 0xffffffffu, v < 0));
}

// Truncation toward zero; NaN is 0 and values outside int64's range saturate (the rule the int32 casts follow).
fn i64_from_f32(x: f32) -> vec2<u32> {
  let u = bitcast<u32>(x);
  let e = (u >> 23u) & 0xffu;
  let negative = (u >> 31u) == 1u;
  if (e == 0xffu && (u & 0x7fffffu) != 0u) {
    return vec2<u32>(0u, 0u);
  }
  if (e < 127u) {
    return vec2<u32>(0u, 0u);
  }
  if (e >= 190u) {
    return select(vec2<u32>(0xffffffffu, 0x7fffffffu), vec2<u32>(0u, 0x80000000u), negative);
  }
  let mant = (u & 0x7fffffu) | 0x800000u;
  var m = vec2<u32>(0u, 0u);
  if (e <= 150u) {
    m = vec2<u32>(mant >> (150u - e), 0u);
  } else {
    let s = e - 150u;
    if (s < 32u) {
      m = vec2<u32>(mant << s, mant >> (32u - s));
    } else {
      m = vec2<u32>(0u, mant << (s - 32u));
    }
  }
  return select(m, i64_neg(m), negative);
}

// a >> s (logical) for 0 < s < 64.
fn u64_shr(a: vec2<u32>, s: u32) -> vec2<u32> {
  if (s < 32u) {
    return vec2<u32>((a.x >> s) | (a.y << (32u - s)), a.y >> s);
  }
  return vec2<u32>(a.y >> (s - 32u), 0u);
}

// The float32 nearest to a (ties to even), as a C cast from int64_t rounds: the magnitude's top 24 bits, rounded
// on the bits shifted out, then scaled by an exact power of two.
fn i64_to_f32(a: vec2<u32>) -> f32 {
  let negative = bitcast<i32>(a.y) < 0;
  let m = select(a, i64_neg(a), negative);
  let bits = select(32u - countLeadingZeros(m.x), 64u - countLeadingZeros(m.y), m.y != 0u);
  var r = 0.0;
  if (bits <= 24u) {
    r = f32(m.x);
  } else {
    let s = bits - 24u;
    var q = u64_shr(m, s).x;
    // The shifted-out bits against half an ulp: s - 1 < 40.
    var rem = vec2<u32>(0u, 0u);
    var half = vec2<u32>(0u, 0u);
    if (s < 32u) {
      rem = vec2<u32>(m.x & ((1u << s) - 1u), 0u);
    } else {
      rem = vec2<u32>(m.x, m.y & ((1u << (s - 32u)) - 1u));
    }
    if (s - 1u < 32u) {
      half = vec2<u32>(1u << (s - 1u), 0u);
    } else {
      half = vec2<u32>(0u, 1u << (s - 33u));
    }
    if (i64_lt(half, rem) || (i64_eq(rem, half) && (q & 1u) == 1u)) {
      q += 1u;
    }
    r = f32(q) * exp2(f32(s));
  }
  return select(r, -r, negative);
}

// Storage offset (in elements) of element e of a view over the output shape: rank <= 8, strides per view.
fn view_offset(e: u32, rank: u32, shape: array<vec4<u32>, 2>, strides: array<vec4<i32>, 2>, offset: u32) -> u32 {
  var rest = e;
  var at = offset;
  for (var d = i32(rank) - 1; d >= 0; d--) {
    let size = shape[d >> 2u][d & 3];
    let i = rest % size;
    rest = rest / size;
    at += u32(i32(i) * strides[d >> 2u][d & 3]);
  }
  return at;
}

fn u64_lt(a: vec2<u32>, b: vec2<u32>) -> bool {
  return a.y < b.y || (a.y == b.y && a.x < b.x);
}

struct U64DivMod {
  q: vec2<u32>,
  r: vec2<u32>,
}

// n / d and n % d of unsigned 64-bit values (d != 0) by shift-and-subtract, one quotient bit a step. The remainder
// stays below d <= 2^63 (d is a magnitude of an int64), so shifting it left never drops a bit.
fn u64_divmod(n: vec2<u32>, d: vec2<u32>) -> U64DivMod {
  var q = vec2<u32>(0u, 0u);
  var r = vec2<u32>(0u, 0u);
  for (var i = 63u; i < 64u; i--) {
    let word = select(n.x, n.y, i >= 32u);
    let bit = (word >> (i & 31u)) & 1u;
    r = vec2<u32>((r.x << 1u) | bit, (r.y << 1u) | (r.x >> 31u));
    if (!u64_lt(r, d)) {
      r = i64_sub(r, d);
      if (i >= 32u) {
        q.y |= 1u << (i - 32u);
      } else {
        q.x |= 1u << i;
      }
    }
  }
  return U64DivMod(q, r);
}

// Signed division of int64 a by b: the quotient (floored: rounded down, else toward zero) or the remainder (floored:
// with b's sign as torch.remainder, else with a's as torch.fmod). A zero divisor gives 0 (the map reports it first: nonzero_i64);
// -2^63 / -1 wraps to -2^63 as in two's complement.
fn i64_divide(a: vec2<u32>, b: vec2<u32>, floored: bool, want_remainder: bool) -> vec2<u32> {
  if (b.x == 0u && b.y == 0u) {
    return vec2<u32>(0u, 0u);
  }
  let a_neg = bitcast<i32>(a.y) < 0;
  let b_neg = bitcast<i32>(b.y) < 0;
  let m = u64_divmod(select(a, i64_neg(a), a_neg), select(b, i64_neg(b), b_neg));
  var q = select(m.q, i64_neg(m.q), a_neg != b_neg);
  var r = select(m.r, i64_neg(m.r), a_neg);
  let inexact = m.r.x != 0u || m.r.y != 0u;
  if (floored && inexact && a_neg != b_neg) {
    q = i64_sub(q, vec2<u32>(1u, 0u));
    r = i64_add(r, b);
  }
  return select(q, r, want_remainder);
}

// torch's integer pow (ATen's powi): squaring with wrapping multiplies; a negative exponent gives 1 for a = 1,
// +-1 for a = -1 (by the exponent's parity) and 0 otherwise.
fn i64_pow(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  if (bitcast<i32>(b.y) < 0) {
    if (a.x == 1u && a.y == 0u) {
      return a;
    }
    if (a.x == 0xffffffffu && a.y == 0xffffffffu) {
      return select(vec2<u32>(1u, 0u), a, (b.x & 1u) == 1u);
    }
    return vec2<u32>(0u, 0u);
  }
  var base = a;
  var e = b;
  var r = vec2<u32>(1u, 0u);
  loop {
    if (e.x == 0u && e.y == 0u) {
      break;
    }
    if ((e.x & 1u) == 1u) {
      r = i64_mul(r, base);
    }
    base = i64_mul(base, base);
    e = u64_shr(e, 1u);
  }
  return r;
}
