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

