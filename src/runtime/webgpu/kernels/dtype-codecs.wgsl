// Bit-exact conversions between f32 and float16 / bfloat16 / float8_e4m3fn / float8_e5m2 codes, the GPU twin of
// src/core/codecs.ts (PyTorch c10 semantics: round-to-nearest-even, correctly rounded subnormals, signed zeros,
// NaN -> the format's quiet NaN of the same sign). Concatenated in front of generated kernels: plain functions only.
//
// Everything works on u32 bit patterns with integer ops. WGSL lets an implementation flush subnormals and assume no
// NaN/Inf in float arithmetic and comparisons, and pack2x16float's rounding and overflow are implementation-defined,
// so no float op ever touches a value here: f32 is only the type at the boundary, crossed with bitcast.

// Decoders: a narrow subnormal is an f32 normal, so the f32 pattern is assembled directly (exact). NaN codes decode
// to a quiet f32 NaN of the same sign, payload kept in the high mantissa bits. They are branchless (every case is
// computed, select picks one): they sit in the inner loops of GEMV/GEMM, where early returns inlined many times
// over make shader compilers slow (SwiftShader's hung) and make invocations diverge.

// The f32 bits of m * 2^(lsb_exp) for a small integer m > 0: exponent from m's leading one.
fn small_int_scaled_bits(m: u32, lsb_exp: u32) -> u32 {
  let p = 31u - countLeadingZeros(m);
  return ((p + lsb_exp) << 23u) | ((m << ((23u - p) & 31u)) & 0x7fffffu);
}

fn f16_to_f32(bits: u32) -> f32 {
  let sgn = (bits & 0x8000u) << 16u;
  let e = (bits >> 10u) & 0x1fu;
  let m = bits & 0x3ffu;
  let normal = ((e + 112u) << 23u) | (m << 13u);
  let special = select(0x7fc00000u | (m << 13u), 0x7f800000u, m == 0u);
  let sub = select(small_int_scaled_bits(m, 103u), 0u, m == 0u);
  return bitcast<f32>(sgn | select(select(normal, special, e == 0x1fu), sub, e == 0u));
}

fn bf16_to_f32(bits: u32) -> f32 {
  return bitcast<f32>((bits & 0xffffu) << 16u);
}

fn e4m3_to_f32(bits: u32) -> f32 {
  let sgn = (bits & 0x80u) << 24u;
  let e = (bits >> 3u) & 0xfu;
  let m = bits & 0x7u;
  let normal = select(((e + 120u) << 23u) | (m << 20u), 0x7fc00000u, e == 0xfu && m == 0x7u);
  let sub = select(small_int_scaled_bits(m, 118u), 0u, m == 0u);
  return bitcast<f32>(sgn | select(normal, sub, e == 0u));
}

fn e5m2_to_f32(bits: u32) -> f32 {
  let sgn = (bits & 0x80u) << 24u;
  let e = (bits >> 2u) & 0x1fu;
  let m = bits & 0x3u;
  let normal = ((e + 112u) << 23u) | (m << 21u);
  let special = select(0x7fc00000u | (m << 21u), 0x7f800000u, m == 0u);
  let sub = select(small_int_scaled_bits(m, 111u), 0u, m == 0u);
  return bitcast<f32>(sgn | select(select(normal, special, e == 0x1fu), sub, e == 0u));
}

// Encoders. Overflow thresholds are the f32 midpoint between the largest finite value and the next binade: for
// f16/bf16/e5m2 the largest finite mantissa is odd, so the midpoint rounds up to Inf; e4m3fn's 448 (mantissa 110)
// is even, so 464 rounds to 448 and only values above 464 become NaN (e4m3fn has no Inf).
//
// Rounding (same in each encoder): a normal result rebiases the exponent in place and rounds off the low mantissa
// bits, ties to even (a carry into the exponent is the correct next binade); a subnormal result shifts the full
// significand so that the format's smallest subnormal is one unit. Shifts are capped at 25: significands are below
// 2^24, so larger shifts round to zero exactly as 25 does, and WGSL masks shift counts to 5 bits.

fn f32_to_f16(x: f32) -> u32 {
  let u = bitcast<u32>(x);
  let sgn = (u >> 16u) & 0x8000u;
  let a = u & 0x7fffffffu;
  if (a > 0x7f800000u) {
    return sgn | 0x7e00u;
  }
  if (a >= 0x477ff000u) {
    return sgn | 0x7c00u;
  }
  let e = a >> 23u;
  var v: u32;
  var s: u32;
  if (e >= 113u) {
    v = a - 0x38000000u;
    s = 13u;
  } else {
    v = (a & 0x7fffffu) | select(0x800000u, 0u, e == 0u);
    s = min(126u - max(e, 1u), 25u);
  }
  let q = v >> s;
  let r = v & ((1u << s) - 1u);
  let halfway = 1u << (s - 1u);
  return sgn | (q + select(0u, 1u, r > halfway || (r == halfway && (q & 1u) == 1u)));
}

fn f32_to_bf16(x: f32) -> u32 {
  let u = bitcast<u32>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    return ((u >> 16u) & 0x8000u) | 0x7fc0u;
  }
  // Same exponent as f32: rounding the low 16 bits covers subnormals and overflow to Inf.
  return (u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u;
}

fn f32_to_e4m3(x: f32, saturate: bool) -> u32 {
  let u = bitcast<u32>(x);
  let sgn = (u >> 24u) & 0x80u;
  let a = u & 0x7fffffffu;
  if (a > 0x7f800000u) {
    return sgn | 0x7fu;
  }
  if (saturate && a > 0x43e00000u) {
    return sgn | 0x7eu;
  }
  if (a > 0x43e80000u) {
    return sgn | 0x7fu;
  }
  let e = a >> 23u;
  var v: u32;
  var s: u32;
  if (e >= 121u) {
    v = a - 0x3c000000u;
    s = 20u;
  } else {
    v = (a & 0x7fffffu) | select(0x800000u, 0u, e == 0u);
    s = min(141u - max(e, 1u), 25u);
  }
  let q = v >> s;
  let r = v & ((1u << s) - 1u);
  let halfway = 1u << (s - 1u);
  return sgn | (q + select(0u, 1u, r > halfway || (r == halfway && (q & 1u) == 1u)));
}

fn f32_to_e5m2(x: f32, saturate: bool) -> u32 {
  let u = bitcast<u32>(x);
  let sgn = (u >> 24u) & 0x80u;
  let a = u & 0x7fffffffu;
  if (a > 0x7f800000u) {
    return sgn | 0x7fu;
  }
  if (saturate && a > 0x47600000u) {
    return sgn | 0x7bu;
  }
  if (a >= 0x47700000u) {
    return sgn | 0x7cu;
  }
  let e = a >> 23u;
  var v: u32;
  var s: u32;
  if (e >= 113u) {
    v = a - 0x38000000u;
    s = 21u;
  } else {
    v = (a & 0x7fffffu) | select(0x800000u, 0u, e == 0u);
    s = min(134u - max(e, 1u), 25u);
  }
  let q = v >> s;
  let r = v & ((1u << s) - 1u);
  let halfway = 1u << (s - 1u);
  return sgn | (q + select(0u, 1u, r > halfway || (r == halfway && (q & 1u) == 1u)));
}
