// scatter's targets: for element e of the index (row-major over its shape), the flat position in a contiguous x
// that it names: its own coordinates with `dim` replaced by its value. The index is checked against the dim's size
// before any multiply, so an out-of-range value (negative, >= size, or an int64 past int32) is reported in the
// device error flag (device-error.ts) and gives the END target, which index-add-chain.wgsl links into no chain: it
// writes nowhere, rather than wrapping to some valid position. WIDE: the index is int64, read as its two words
// (lo, hi); p.idx_strides and p.idx_off are in words then. The header and the loop come from webgpu.ts.

const END = 0xffffffffu;

fn scatter_target_at(e: u32) -> u32 {
  let at = strided_offset(e, p.idx_off, p.rank, p.shape, p.idx_strides);
  var id = bitcast<i32>(idx[at]);
  var fits = true;
  if (WIDE == 1u) {
    // In int32's range iff the high word is the sign extension of the low one.
    let hi = bitcast<i32>(idx[at + 1u]);
    fits = hi == (id >> 31u);
    if (!fits) {
      id = select(2147483647, -2147483647 - 1, hi < 0);
    }
  }
  if (!fits || id < 0 || u32(id) >= p.dim_size) {
    report_error(ERR_OP, id, p.dim_size);
    return END;
  }
  var rem = e;
  var flat = 0u;
  for (var d = i32(p.rank) - 1; d >= 0; d--) {
    let size = p.shape[d / 4][d % 4];
    let c = select(rem % size, u32(id), u32(d) == p.dim);
    flat += c * p.x_strides[d / 4][d % 4];
    rem /= size;
  }
  return flat;
}
