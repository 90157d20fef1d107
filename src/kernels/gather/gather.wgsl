// out = x.gather(dim, index): out[..., j, ...] = x[..., index[..., j, ...], ...] along dim, the storage code of
// output element e (codes are copied raw). The x view handed in has the index's shape with a zero stride on dim,
// so strided_offset gives every coordinate but dim's, which comes from the index. An out-of-range index is reported
// in the device error flag (device-error.ts), raised at the next read back; its element is written as 0.
// The header and the one-word-per-invocation loop come from the description in webgpu.ts.

fn gather_at(e: u32) -> u32 {
  let id = bitcast<i32>(idx[strided_offset(e, p.idx_off, p.rank, p.shape, p.idx_strides)]);
  if (id < 0 || u32(id) >= p.dim_size) {
    report_error(ERR_OP, id, p.dim_size);
    return 0u;
  }
  return code_x(strided_offset(e, p.x_off, p.rank, p.shape, p.x_strides) + u32(id) * p.dim_stride);
}
