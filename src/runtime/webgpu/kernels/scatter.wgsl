// Writes a strided source into a strided view of existing storage (cat, slice assignment), converting dtype, one
// invocation per element (the header and the loop come from the description in elementwise.ts). Sub-word dtypes
// are merged into their word with atomics (the generated store), because neighbouring elements of a view may belong to
// different invocations.

fn scatter_element(e: u32) {
  let code = encode_out(load_in0(strided_offset(e, p.off0, p.rank, p.shape, p.strides0)));
  let d = strided_offset(e, p.off1, p.rank, p.shape, p.strides1);
{{STORE}}
}
