// Merges the per-split states of attention.wgsl (SPLIT) into the output, one invocation per output word:
// out = sum_s acc_s exp(m_s - M) / sum_s l_s exp(m_s - M) with M the largest split max, and the same NaN / zero
// rules as the single-pass kernel. Partials: [rows * splits] (max, sum) pairs, then [rows * splits, D] acc.
// The output gate, when there is one, multiplies the merged value (gated(), from webgpu.ts).
// The header and the one-word-per-invocation loop come from the description in webgpu.ts.

{{VISIBLE}}

fn merged(e: u32) -> f32 {
  let row = e / p.d;
  return gated(row / p.hq, row % p.hq, e % p.d, merged_state(e));
}

fn merged_state(e: u32) -> f32 {
  let row = e / p.d;
  let c = e % p.d;
  if (visible(row / p.hq) == 0u) {
    return 0.0;
  }
  var mx = f32_bits(0xff800000u);
  var bad = false;
  for (var s = 0u; s < p.splits; s++) {
    let ms = part[(row * p.splits + s) * 2u];
    bad = bad || is_nan(ms);
    if (!is_nan(ms)) {
      mx = max(mx, ms);
    }
  }
  if (bad || mx == f32_bits(0xff800000u)) {
    return f32_bits(0x7fc00000u);
  }
  var sum = 0.0;
  var acc = 0.0;
  for (var s = 0u; s < p.splits; s++) {
    let ms = part[(row * p.splits + s) * 2u];
    let f = select(exp(ms - mx), 0.0, ms - mx < -88.0);
    sum += part[(row * p.splits + s) * 2u + 1u] * f;
    acc += part[p.acc_base + (row * p.splits + s) * p.d + c] * f;
  }
  return acc / sum;
}
