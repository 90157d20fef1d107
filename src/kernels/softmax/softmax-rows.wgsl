// Softmax / log-softmax of short rows, one invocation per row (d <= 64 on every adapter, longer on software ones:
// SOFTMAX_POLICIES in webgpu.ts): many short rows (attention scores in prefill) would otherwise leave most of a
// workgroup per row idle. Same layout and NaN rules as softmax.wgsl.
// The header and the one-invocation-per-row main (calling softmax_row for row < p.rows) come from the description
// in webgpu.ts.

fn softmax_row(row: u32) {
  let base = p.offset + (row / p.inner) * p.d * p.inner + row % p.inner;
  // A running max and sum, one exp an element (the rescale runs only when the max grows); m starts at the least
  // finite f32, so -Inf entries add exp(-inf) = 0. NaN and +Inf entries make the row NaN, as a row of only -Inf does
  // (it ends with s == 0), as torch gives.
  var m = -3.4028234663852886e38;
  var s = 0.0;
  var poisoned = false;
  for (var j = 0u; j < p.d; j++) {
    let v = load_x(base + j * p.inner);
    let b = bitcast<u32>(v);
    poisoned = poisoned | ((b & 0x7fffffffu) > 0x7f800000u) | (b == 0x7f800000u);
    if (v > m) {
      s *= exp_below_max(m - v);
      m = v;
    }
    s += exp_below_max(v - m);
  }
  let row_max = m;
  let row_sum = select(s, f32_bits(0x7fc00000u), poisoned || s == 0.0);
  let inv = 1.0 / row_sum;
  let log_sum = log(row_sum);
  let first = base - p.offset;
  for (var j = 0u; j < p.d; j += LANES) {
{{STORE}}
  }
}
