// A contiguous int64 tensor (from element x_off) converted to another dtype, packed by the standard word loop:
// floats round to nearest even from the exact value, int32 keeps the low word (wraps, as torch), uint8 its low
// byte, bool is x != 0; the index form gives INT32_MIN for a value outside int32 so an index kernel reports it.

fn int64_to_at(e: u32) -> {{C}} {
  let k = p.x_off + e;
  let a = vec2<u32>(x[2u * k], x[2u * k + 1u]);
  return {{CONVERT}};
}
