// The combine step of the grouped expert GEMM: out[t, n] = sum_j combine[t, j] * slot_out[t * k + j, n] over the
// slots with an in-range expert id (as the GEMV path, which skips the others). One output word per invocation
// (1 or 2 packed elements, which may straddle rows), so 16-bit outputs need no atomics and no f32 copy. The header
// (params, bindings, encode_out) and the one-word-per-invocation loop come from the description in expert-gemm.ts.

fn combine_at(i: u32) -> f32 {
  let tok = i / p.n;
  let col = i % p.n;
  var acc = 0.0;
  for (var j = 0u; j < p.slots; j++) {
    if (ids[p.ids_off + tok * p.ids_s0 + j * p.ids_s1] < p.experts) {
      acc += bitcast<f32>(comb[p.c_off + tok * p.c_s0 + j * p.c_s1]) * slot_out[(tok * p.slots + j) * p.n + col];
    }
  }
  return acc;
}
