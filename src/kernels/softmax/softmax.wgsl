// Softmax / log-softmax of rows of a contiguous [outer, d, inner] input (the row runs along d), one workgroup per
// row, in one dispatch: pass 1 keeps an online (max, sum of exp) per invocation and merges them in workgroup
// memory; pass 2 writes exp(x - max) / sum (or x - max - log(sum)). The row is read twice and written once.
// A row of all -Inf gives NaN and a NaN anywhere makes the row NaN, as torch does.
// The header (params, bindings, load_x/encode_out, WG, LANES, BITS, the online-softmax helpers) comes from the
// description in webgpu.ts; the STORE placeholder is the launcher's loop body writing element(s) j.

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) {
    return;
  }
  let t = lid.x;
  let base = p.offset + (row / p.inner) * p.d * p.inner + row % p.inner;
  var m = f32_bits(0xff800000u);
  var s = 0.0;
  for (var j = t; j < p.d; j += WG) {
    let r = merge(m, s, load_x(base + j * p.inner), 1.0);
    m = r.x;
    s = r.y;
  }
  let total = reduce_state(t, m, s);
  let row_max = total.x;
  let row_sum = row_sum_or_nan(total);
  let inv = 1.0 / row_sum;
  let log_sum = log(row_sum);
  // Packed outputs (lanes > 1) are written a word at a time; the launcher only picks them when every row is whole
  // words (inner == 1, d a multiple of lanes), else it computes f32 and casts.
  let first = base - p.offset;
  for (var j = t * LANES; j < p.d; j += WG * LANES) {
{{STORE}}
  }
}
