// A contiguous int64 copy of a contiguous tensor of another dtype: floats truncate toward zero (NaN -> 0, out of
// range saturates), int32 sign-extends, uint8/bool zero-extend. One invocation per element, two words each.

fn int64_from_at(i: u32) {
  let v = {{CONVERT}};
  out[2u * i] = v.x;
  out[2u * i + 1u] = v.y;
}
