// The workgroup reduction both gradient-norm passes end in: each invocation's s combined with norm_combine in a
// tree over workgroup memory; every invocation of the workgroup calls it and gets the total.

var<workgroup> acc: array<f32, WG>;

fn workgroup_norm(t: u32, s: f32) -> f32 {
  acc[t] = s;
  workgroupBarrier();
  for (var k = WG / 2u; k > 0u; k >>= 1u) {
    if (t < k) {
      acc[t] = norm_combine(acc[t], acc[t + k]);
    }
    workgroupBarrier();
  }
  return acc[0];
}
