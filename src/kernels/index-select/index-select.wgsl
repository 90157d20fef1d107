// out = x.index_select(dim, index), x viewed as contiguous [outer, d, inner]: the storage code of output element e.
// Elements are copied as raw codes (no dtype conversion). An index outside [0, d) (negative ones too, as torch) is
// reported in the device error flag, raised at the next read back (device-error.ts); its element is written as 0.
// The header and the one-word-per-invocation loop come from the description in webgpu.ts.

fn index_select_at(e: u32) -> u32 {
  let row = p.n_idx * p.inner;
  let o = e / row;
  let r = e % row;
  let id = bitcast<i32>(idx[p.idx_off + r / p.inner]);
  if (id < 0 || u32(id) >= p.d) {
    report_error(ERR_OP, id, p.d);
    return 0u;
  }
  return code_x(p.x_off + (o * p.d + u32(id)) * p.inner + r % p.inner);
}
