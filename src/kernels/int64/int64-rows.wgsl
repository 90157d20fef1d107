// One reduction along the rows of a contiguous int64 [rows, len] tensor from element x_off, one invocation per row in
// order: running sums and products wrap modulo 2^64 as torch's int64; max / min keep the first extreme, whose
// index the arg ops write as int64. INIT, STEP and END come from webgpu.ts (the extremes start at element 0, the
// caller refuses an empty row for them).

fn int64_rows_at(r: u32) {
  let base = p.x_off + r * p.len;
  var acc = {{INIT}};
  var best = 0u;
  for (var j = {{START}}; j < p.len; j++) {
    let k = base + j;
    let v = vec2<u32>(x[2u * k], x[2u * k + 1u]);
    {{STEP}}
  }
  {{END}}
}
