// Expert-indexed linear layer for MoE in one dispatch, the expert ids read here from the ids buffer (no read back):
// out[r, n] = x_row . W[e, n, :] for the expert e of each slot (gather), or the routing-weighted sum of a token's k
// slots (combine). Modelled on the decode GEMV (gemv.wgsl): 64 invocations share one output column, 4 columns per
// workgroup; the grid runs over (column block, output row), the output row being a slot (gather) or a token
// (combine). Every weight byte of a slot's expert rows is read once per slot, 16 bytes a load when the rows are
// 16-byte aligned (else one word, else one element), and dequantized in registers (FP8 through a workgroup table).
// An expert id outside 0..E-1 contributes zeros. Epilogues: SwiGLU (gather; each column accumulates its gate row
// and its up row, p.n being the output width, half the weight's rows) and a residual add (combine). The header
// (params, bindings, load_x/load_res/encode_out, decode_w/load_w, block_scale, finish, Acc, TPO invocations per
// output column, OPW columns per workgroup) comes from the description in expert-linear.ts.

var<workgroup> red: array<Acc, WG>;

// This invocation's share of x_row . W[e, n, :], x_row starting at element xrow of x.
fn partial_dot(e: u32, n: u32, xrow: u32, t: u32) -> f32 {
  var acc = 0.0;
{{DOT}}
  return acc;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>{{SUBGROUP_BUILTINS}}) {
  let wg = wid.x + wid.y * nwg.x;
  let g = lid.x / TPO;
  let t = lid.x % TPO;
  let cb = wg % p.col_blocks;
  // Output row; past rows_out in a folded grid, the workgroup only joins the barriers.
  let orow = wg / p.col_blocks;
  let n = cb * OPW + g;
{{LUT_FILL}}
  var acc = Acc();
  if (n < p.n && orow < p.rows_out) {
{{ACCUMULATE}}
  }
  // Sum the TPO partials of each output column into red[g * TPO].
{{REDUCE}}
  if (lid.x == 0u && orow < p.rows_out) {
    let n0 = cb * OPW;
{{STORE}}
  }
}
