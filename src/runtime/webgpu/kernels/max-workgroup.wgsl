// max with NaN winning (torch.max propagates NaN; WGSL's max need not), the combine of workgroup_max(t, v): the
// largest of WG values, one per invocation, which every invocation of the workgroup calls and gets (the tree of
// workgroup-reduce.wgsl, instantiated with this file by maxWorkgroupWgsl() in the log-mel launcher).
fn nan_max(a: f32, b: f32) -> f32 {
  return select(max(a, b), select(a, b, is_nan(b)), is_nan(a) || is_nan(b));
}
