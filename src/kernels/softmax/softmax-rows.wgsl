// Softmax / log-softmax of short rows (d <= 64), one invocation per row: many short rows (attention scores in
// prefill) would otherwise leave most of a workgroup per row idle. Same layout and NaN rules as softmax.wgsl.
// The header and the one-invocation-per-row main (calling softmax_row for row < p.rows) come from the description
// in softmax.ts.

fn softmax_row(row: u32) {
  let base = p.offset + (row / p.inner) * p.d * p.inner + row % p.inner;
  var m = f32_bits(0xff800000u);
  var s = 0.0;
  for (var j = 0u; j < p.d; j++) {
    let r = merge(m, s, load_x(base + j * p.inner), 1.0);
    m = r.x;
    s = r.y;
  }
  let row_max = m;
  let row_sum = row_sum_or_nan(vec2<f32>(m, s));
  let inv = 1.0 / row_sum;
  let log_sum = log(row_sum);
  let first = base - p.offset;
  for (var j = 0u; j < p.d; j += LANES) {
{{STORE}}
  }
}
