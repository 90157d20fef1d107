// Online softmax state (running max m, sum s of exp(x - m)), shared by the one-pass and split-row kernels.

// exp that is exactly 0 far below the max (and for -Inf), whatever the GPU's exp does with huge negative inputs;
// NaN stays NaN.
fn exp_below_max(d: f32) -> f32 {
  return select(select(exp(d), 0.0, d < -88.0), d, is_nan(d));
}

// Merges two online-softmax states (m, s): s is the sum of exp(x - m). An empty state is (-Inf, 0).
fn merge(m1: f32, s1: f32, m2: f32, s2: f32) -> vec2<f32> {
  if (is_nan(m1) || is_nan(m2)) {
    return vec2<f32>(f32_bits(0x7fc00000u), 0.0);
  }
  let m = max(m1, m2);
  if (m == f32_bits(0xff800000u)) {
    return vec2<f32>(m, 0.0);
  }
  return vec2<f32>(m, s1 * exp_below_max(m1 - m) + s2 * exp_below_max(m2 - m));
}

// Workgroup-wide merge of every invocation's state (WG is the including kernel's workgroup size). The result is
// read with workgroupUniformLoad: callers branch on it around barriers.
var<workgroup> wg_max: array<f32, WG>;
var<workgroup> wg_sum: array<f32, WG>;

fn reduce_state(t: u32, m: f32, s: f32) -> vec2<f32> {
  wg_max[t] = m;
  wg_sum[t] = s;
  workgroupBarrier();
  for (var k = WG / 2u; k > 0u; k >>= 1u) {
    if (t < k) {
      let r = merge(wg_max[t], wg_sum[t], wg_max[t + k], wg_sum[t + k]);
      wg_max[t] = r.x;
      wg_sum[t] = r.y;
    }
    workgroupBarrier();
  }
  return vec2<f32>(workgroupUniformLoad(&wg_max[0]), workgroupUniformLoad(&wg_sum[0]));
}

// The row's sum, or NaN for rows of all -Inf (0/0) or with a NaN, as torch gives.
fn row_sum_or_nan(total: vec2<f32>) -> f32 {
  return select(total.y, f32_bits(0x7fc00000u), total.x == f32_bits(0xff800000u) || is_nan(total.x));
}
