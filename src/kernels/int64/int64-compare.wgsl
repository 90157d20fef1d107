// out = a <op> b (bool) over int64 views broadcast to the output shape, signed 64-bit comparisons; the standard
// word loop packs four bools a word. The helpers come from int64-math.wgsl, the header from webgpu.ts.

fn int64_compare_at(e: u32) -> i32 {
  let ia = view_offset(e, p.rank, p.shape, p.a_strides, p.a_off);
  let ib = view_offset(e, p.rank, p.shape, p.b_strides, p.b_off);
  let a = vec2<u32>(a_words[2u * ia], a_words[2u * ia + 1u]);
  let b = vec2<u32>(b_words[2u * ib], b_words[2u * ib + 1u]);
  return select(0, 1, {{OP}});
}
