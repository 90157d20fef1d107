// Gradient clipping's in-place scale: every element times the clip coefficient that grad-norm-total.wgsl left on
// the device (so nothing is read back). The word loop around it (webgpu.ts) rewrites whole words.

fn param_update(i: u32, x: f32) -> f32 {
  return x * coef[0];
}
