// Decode GEMV: out[m, n] = sum_k a[m, k] * w[n, k] for M <= 4 activation rows and a weight stored [N, K] with K
// contiguous (the layout of checkpoints). Every weight byte is read once, 16 bytes per load, and dequantized in
// registers; TPO invocations (16..64, fewer for short rows) share one output column and combine through workgroup memory.
// Batch-invariant mode groups rows in fours along the grid's z (ROW_GROUP sets row0; a_vec reads rows row0..row0+3).
// The header (params, bindings, load_x/code_x/load_w/encode_out, decode_w, a_vec, epilogue, column_value, TPO, OPW =
// WG / TPO output columns a workgroup, ELEMS_PER_CHUNK) comes from the description in gemv.ts.

var<workgroup> red: array<vec4<f32>, WG>;

// One output column's TPO-strided partial dot product with weight row n (the tail of the row included).
fn row_partial(n: u32, t: u32) -> vec4<f32> {
  var acc = vec4<f32>(0.0);   // one lane per activation row m
  let row = p.b_off_chunks + n * p.b_row_chunks;
  for (var c = t; c < p.chunks; c += TPO) {
    let chunk = w[row + c];
    let k0 = c * ELEMS_PER_CHUNK;
    var part = vec4<f32>(0.0);
{{CHUNK_BODY}}
    acc += part{{CHUNK_SCALE}};
  }
  // The last k % ELEMS_PER_CHUNK elements of the row, one per invocation.
  let k = p.chunks * ELEMS_PER_CHUNK + t;
  if (k < p.k) {
    acc += load_w(row * ELEMS_PER_CHUNK + k) * a_vec(k){{TAIL_SCALE}};
  }
  return acc;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>{{SUBGROUP_BUILTINS}}) {
  let wg = wid.x + wid.y * nwg.x;
  let g = lid.x / TPO;
  let t = lid.x % TPO;
  let n = wg * OPW + g;
{{ROW_GROUP}}
{{LUT_FILL}}
  var acc = vec4<f32>(0.0);
  if (n < p.n) {
    acc = row_partial(n, t);
  }
  // Sum the TPO partials of each output column into red[g * TPO].
{{REDUCE}}
{{SECOND_ROW}}
  if (lid.x == 0u) {
    let n0 = wg * OPW;
{{STORE}}
  }
}
