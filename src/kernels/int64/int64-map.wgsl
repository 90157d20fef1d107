// out = op(a, b) over int64 views broadcast to the output shape (a unary op reads b = a): one invocation per
// element, two words each. The helpers (i64_*, view_offset) come from int64-math.wgsl, the header from webgpu.ts.

fn int64_map_at(e: u32) {
  let ia = view_offset(e, p.rank, p.shape, p.a_strides, p.a_off);
  let ib = view_offset(e, p.rank, p.shape, p.b_strides, p.b_off);
  let a = vec2<u32>(a_words[2u * ia], a_words[2u * ia + 1u]);
  let b = vec2<u32>(b_words[2u * ib], b_words[2u * ib + 1u]);
  let r = {{OP}};
  out[2u * e] = r.x;
  out[2u * e + 1u] = r.y;
}
