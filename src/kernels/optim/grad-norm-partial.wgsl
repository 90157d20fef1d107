// First pass of the global gradient norm: workgroup k of this gradient's dispatch reduces the elements
// k * WG + t, stepping by p.groups * WG (|g|, g^2 or max |g| by the NORM variant), and writes its total to
// partial[p.slot0 + k] (workgroup_norm, see webgpu.ts). One dispatch per gradient; grad-norm-total.wgsl combines
// every slot.

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let t = lid.x;
  var s = 0.0;
  for (var e = wid.x * WG + t; e < p.n; e += p.groups * WG) {
    s = norm_combine(s, norm_term(load_g(p.g_off + e)));
  }
  let total = workgroup_norm(t, s);
  if (t == 0u) {
    partial[p.slot0 + wid.x] = total;
  }
}
