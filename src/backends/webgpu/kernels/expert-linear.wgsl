// Expert-indexed linear layer for MoE in one dispatch, the expert ids read here from the ids buffer (no read back):
// out[r, n] = x_row . W[e, n, :] for the expert e of each slot (gather), or the routing-weighted sum of a token's k
// slots (combine). Modelled on the decode GEMV (gemv.wgsl): 64 invocations share one output column, 4 columns per
// workgroup; the grid runs over (column block, output row), the output row being a slot (gather) or a token
// (combine). Every weight byte of a slot's expert rows is read once per slot, 16 bytes a load when the rows are
// 16-byte aligned (else one word, else one element), and dequantized in registers (FP8 through a workgroup table).
// An expert id outside 0..E-1 contributes zeros. Epilogues: SwiGLU (gather; each column accumulates its gate row
// and its up row, p.n being the output width, half the weight's rows) and a residual add (combine).

struct Params {
  n: u32,
  k: u32,
  experts: u32,
  slots: u32,         // k of the top-k: ids is [T, slots]
  rows_out: u32,      // T * slots (gather) or T (combine)
  col_blocks: u32,    // ceil(n / OPW)
  x_off: u32,
  x_s0: u32,
  x_s1: u32,
  x_per_slot: u32,    // x has a row per slot (1) or per token (0)
  w_off: u32,         // weight offset, expert and row strides, in load units (16-byte chunks, words or elements)
  w_se: u32,
  w_sn: u32,
  w_sk: u32,          // element stride along K (element loads only)
  chunks: u32,        // whole load units per row: floor(k / UNIT_ELEMS)
  k_blocks: u32,      // ceil(k / 128)
  n_blocks: u32,      // ceil(n / 128)
  ids_off: u32,
  ids_s0: u32,
  ids_s1: u32,
  c_off: u32,
  c_s0: u32,
  c_s1: u32,
  _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> xin: array<u32>;
@group(0) @binding(3) var<storage, read> w: array<{{W_UNIT}}>;
@group(0) @binding(4) var<storage, read> ids: array<u32>;
{{EXTRA_BINDINGS}}

const TPO = 64u;  // invocations per output column
const OPW = 4u;   // output columns per workgroup

var<workgroup> red: array<{{ACC_TYPE}}, 256>;
{{LUT_DECL}}

{{FUNCTIONS}}

// This invocation's share of x_row . W[e, n, :], x_row starting at element xrow of xin.
fn partial_dot(e: u32, n: u32, xrow: u32, t: u32) -> f32 {
  var acc = 0.0;
{{DOT}}
  return acc;
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>{{SUBGROUP_BUILTINS}}) {
  let wg = wid.x + wid.y * nwg.x;
  let g = lid.x / TPO;
  let t = lid.x % TPO;
  let cb = wg % p.col_blocks;
  // Output row; past rows_out in a folded grid, the workgroup only joins the barriers.
  let orow = wg / p.col_blocks;
  let n = cb * OPW + g;
{{LUT_FILL}}
  var acc = {{ACC_ZERO}};
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
