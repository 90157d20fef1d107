// out = op(a, b) over int64 views broadcast to the output shape (a unary op reads b = a): one invocation per
// element, two words each. A side that is a number (A or B) reads it from the params (s_lo, s_hi), not a buffer.
// The helpers (i64_*, view_offset) come from int64-math.wgsl, the header from webgpu.ts.

fn int64_map_at(e: u32) {
  let ia = view_offset(e, p.rank, p.shape, p.a_strides, p.a_off);
  let ib = view_offset(e, p.rank, p.shape, p.b_strides, p.b_off);
  let a = {{A}};
  let b = {{B}};
  let r = {{OP}};
  out[2u * e] = r.x;
  out[2u * e + 1u] = r.y;
}
