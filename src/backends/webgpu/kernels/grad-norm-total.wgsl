// Second pass of the global gradient norm, one workgroup: combines the p.slots partial results into the norm
// (sqrt of the sum for L2), writes it to norm_out[0], and the clip coefficient min(1, max_norm / (norm + 1e-6))
// (torch.nn.utils.clip_grad_norm_, NaN kept) to coef[0] for grad-scale.wgsl.

var<workgroup> acc: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  var s = 0.0;
  for (var e = t; e < p.slots; e += WG) {
    s = norm_combine(s, partial[e]);
  }
  acc[t] = s;
  workgroupBarrier();
  for (var k = WG / 2u; k > 0u; k >>= 1u) {
    if (t < k) {
      acc[t] = norm_combine(acc[t], acc[t + k]);
    }
    workgroupBarrier();
  }
  if (t == 0u) {
    let norm = norm_finish(acc[0]);
    let c = p.max_norm / (norm + 1e-6);
    norm_out[0] = norm;
    coef[0] = select(min(c, 1.0), c, is_nan(c));
  }
}
