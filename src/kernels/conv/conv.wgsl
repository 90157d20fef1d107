// Direct convolution over [N, C, T, H, W] (a 2-D convolution is T = 1, kt = 1), f32 accumulation, no workgroup
// memory and no barriers: element e of the contiguous output, one output word (1 or 2 elements) per invocation,
// any output dtype. x, weight, bias and previous are read through their strides, so views need no copy. Padding is
// never materialized: a window position outside the input is skipped by a bounds check (conv-window.wgsl), which is
// what reading a zero would add. padBefore shifts the window; padding after the input only made the output larger
// (the launcher sized it), and those positions fail the same check. With previous (P cached frames), time positions
// tx in [-P, 0) read previous[P + tx] instead of being skipped: the causal padding's last P zeros become real
// frames. They come before every frame of x, so summing window_p's taps, then window_x's, keeps the order of the
// frames. The header (Acc = f32, the windows) and the one-word-per-invocation loop come from the description in
// conv.ts.

fn conv_at(e: u32) -> f32 {
  var r = e;
  let ow = r % p.wo;
  r /= p.wo;
  let oh = r % p.ho;
  r /= p.ho;
  let ot = r % p.to;
  r /= p.to;
  let oc = r % p.o;
  let n = r / p.o;
  let c0 = (oc / p.og) * p.cg;
  let wbase = p.w_off + oc * p.ws_o;
  let t0 = i32(ot * p.st) - p.pt;
  let h0 = i32(oh * p.sh) - p.ph;
  let w0 = i32(ow * p.sw) - p.pw;
  let acc = window_p(p.p_off + n * p.ps_n + c0 * p.ps_c, wbase, t0 + i32(p.np), p.np, h0, w0, {{BIAS}});
  return window_x(p.x_off + n * p.xs_n + c0 * p.xs_c, wbase, t0, p.t, h0, w0, acc);
}
