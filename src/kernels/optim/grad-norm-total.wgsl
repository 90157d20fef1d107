// Second pass of the global gradient norm, one workgroup: combines the p.slots partial results into the norm
// (sqrt of the sum for L2), writes it to norm_out[0], and the clip coefficient min(1, max_norm / (norm + 1e-6))
// (torch.nn.utils.clip_grad_norm_, NaN kept) to coef[0] for grad-scale.wgsl.

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
  let t = lid.x;
  var s = 0.0;
  for (var e = t; e < p.slots; e += WG) {
    s = norm_combine(s, partial[e]);
  }
  let total = workgroup_norm(t, s);
  if (t == 0u) {
    let norm = norm_finish(total);
    let c = p.max_norm / (norm + 1e-6);
    norm_out[0] = norm;
    coef[0] = select(min(c, 1.0), c, is_nan(c));
  }
}
