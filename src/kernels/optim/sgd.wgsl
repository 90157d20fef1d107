// One SGD step of one element (torch.optim.sgd's single-tensor path): the gradient negated for maximize, plus
// wd * param; with momentum, buf = g on the buffer's first step, else buf * momentum + (1 - dampening) * g, and
// the step direction is g + momentum * buf (nesterov) or buf; param += -lr * direction. The word loop around it
// (webgpu.ts) reads the parameter's word and writes it back, rounded once. neg_lr() and is_first() are the host's
// uniforms, or (capturable) read from the device lr and step counter.

fn param_update(i: u32, x: f32) -> f32 {
  var g = grad_at(i);
  if (p.maximize != 0u) {
    g = -g;
  }
  if (p.wd != 0.0) {
    g = g + p.wd * x;
  }
  {{MOMENTUM}}
  return x + neg_lr() * g;
}
