// out = F.pad(x): the storage code of output element e, copied unconverted, so every dtype pads the same way. Each
// element's coordinates come from its linear index (u32 divisions per dim), never from the workgroup grid, so no
// dim's size (H*W >= 65536 included) meets a grid or 16-bit limit. The header and the one-word-per-invocation loop
// come from the description in webgpu.ts.

// Input position for output coordinate o of dim d; constant mode answers -1 outside the input.
fn source(o: u32, d: u32) -> i32 {
  let size = i32(p.in_shape[d / 4u][d % 4u]);
  let i = i32(o) - p.before[d / 4u][d % 4u];
  if (i >= 0 && i < size) {
    return i;
  }
  {{OUTSIDE}}
}

fn pad_at(e: u32) -> u32 {
  var rem = e;
  var off = p.x_off;
  for (var d = i32(p.rank) - 1; d >= 0; d--) {
    let du = u32(d);
    let size = p.out_shape[du / 4u][du % 4u];
    let i = source(rem % size, du);
    if (i < 0) {
      return p.fill;
    }
    off += u32(i) * p.strides[du / 4u][du % 4u];
    rem /= size;
  }
  return code_x(off);
}
