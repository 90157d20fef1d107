// out = a <op> b (bool) over int64 views broadcast to the output shape, signed 64-bit comparisons; the standard
// word loop packs four bools a word; a side that is a number (A or B) reads it from the params. The helpers come from int64-math.wgsl, the header from webgpu.ts.

fn int64_compare_at(e: u32) -> i32 {
  let ia = view_offset(e, p.rank, p.shape, p.a_strides, p.a_off);
  let ib = view_offset(e, p.rank, p.shape, p.b_strides, p.b_off);
  let a = {{A}};
  let b = {{B}};
  return select(0, 1, {{OP}});
}
