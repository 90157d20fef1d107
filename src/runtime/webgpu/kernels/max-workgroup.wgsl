// The largest of WG values, one per invocation, with NaN winning (torch.max propagates NaN; WGSL's max need not).
// Every invocation of the workgroup must call workgroup_max (it holds barriers) and gets the result.
var<workgroup> wmax: array<f32, WG>;

fn nan_max(a: f32, b: f32) -> f32 {
  return select(max(a, b), select(a, b, is_nan(b)), is_nan(a) || is_nan(b));
}

fn workgroup_max(t: u32, v: f32) -> f32 {
  wmax[t] = v;
  workgroupBarrier();
  for (var span = WG / 2u; span > 0u; span /= 2u) {
    if (t < span) {
      wmax[t] = nan_max(wmax[t], wmax[t + span]);
    }
    workgroupBarrier();
  }
  let m = wmax[0];
  workgroupBarrier();
  return m;
}
