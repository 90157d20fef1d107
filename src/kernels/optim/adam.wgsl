// One Adam / AdamW step of one element (torch.optim's single-tensor path, in its order): the gradient negated for
// maximize; AdamW's decoupled decay multiplies the parameter first (decay = 1 - lr * weight_decay, 1 for Adam);
// Adam's L2 term adds wd * param to the gradient; m.lerp_(g, 1 - beta1) with torch's two-sided lerp;
// v = v * beta2 + (1 - beta2) * g * g; amsgrad keeps vmax = max(vmax, v) and divides by it;
// param += (-lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps). m, v (and vmax) are float32 state updated in place; on
// the state's first step they are read as zeros, so the launcher never fills them. The word loop around it
// (webgpu.ts) reads the parameter's word and writes it back, rounded once.

fn param_update(i: u32, x0: f32) -> f32 {
  var g = grad_at(i);
  if (p.maximize != 0u) {
    g = -g;
  }
  let x = x0 * decay_factor();
  if (p.wd != 0.0) {
    g = g + p.wd * x;
  }
  let first = is_first();
  let m0 = select(m[i], 0.0, first);
  let v0 = select(v[i], 0.0, first);
  // torch's lerp: self + w * (end - self) for |w| < 0.5, else end - (end - self) * (1 - w).
  let mm = select(g - (g - m0) * (1.0 - p.omb1), m0 + p.omb1 * (g - m0), abs(p.omb1) < 0.5);
  let vv = v0 * p.b2 + p.omb2 * g * g;
  m[i] = mm;
  v[i] = vv;
  var vd = vv;
  {{AMSGRAD}}
  let denom = sqrt(vd) / bc2_sqrt() + p.eps;
  return x + neg_step() * mm / denom;
}
