// Cross-entropy forward over rows of logits [rows, d] (any float dtype, read through row and column strides), one
// workgroup per row: each invocation keeps an online (max, sum of exp) over its workgroup-strided part of the row,
// the states are merged in workgroup memory (softmax-workgroup.wgsl), and invocation 0 writes the row's logsumexp
// and nll = lse - x[target], as (max - x[target]) + log(sum) so that a small loss keeps its precision. The row is
// read once. Ignored targets give nll 0; a target outside [0, d) that is not ignored is reported in the device
// error flag (device-error.ts: raised at the next read back, as torch raises) and its nll is NaN. A NaN anywhere, a +Inf, or a row of all -Inf gives lse NaN (torch).
// The header (params, bindings, load_x, WG, the online-softmax helpers) comes from the description in
// webgpu.ts.

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) {
    return;
  }
  let t = lid.x;
  let base = p.x_off + row * p.row_stride;
  var m = f32_bits(0xff800000u);
  var s = 0.0;
  for (var j = t; j < p.d; j += WG) {
    let r = merge(m, s, load_x(base + j * p.col_stride), 1.0);
    m = r.x;
    s = r.y;
  }
  let total = reduce_state(t, m, s);
  if (t != 0u) {
    return;
  }
  let row_max = total.x;
  let log_sum = log(row_sum_or_nan(total));
  lse[row] = row_max + log_sum;
  let label = targets[p.t_off + row * p.t_stride];
  var loss = 0.0;
  if (label != p.ignore_index) {
    if (label < 0 || u32(label) >= p.d) {
      report_error(ERR_OP, label, p.d);
      loss = f32_bits(0x7fc00000u);
    } else {
      loss = (row_max - load_x(base + u32(label) * p.col_stride)) + log_sum;
    }
  }
  nll[row] = loss;
}
