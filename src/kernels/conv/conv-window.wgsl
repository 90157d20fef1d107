// The taps of one input source of the direct convolution, instantiated per source by webgpu.ts into the kernels of
// conv.wgsl and conv-blocked.wgsl (whose headers come from the descriptions there): window_x reads x, window_p
// previous's cached frames (strides p.ps_*); SRC is the source's stride prefix, and the column step, the loads and
// the fmas are snippets of the variant (one accumulator, or a block of them: see conv-blocked.wgsl). Frames
// f = t0 + a * dt outside [0, frames), and rows and columns outside the input, are skipped: the padding's zeros.
fn window_{{SRC}}(base: u32, wbase: u32, t0: i32, frames: u32, h0: i32, w0: i32, acc_in: Acc) -> Acc {
  var acc = acc_in;
  for (var a = 0u; a < p.kt; a++) {
    let f = t0 + i32(a * p.dt);
    if (f < 0 || f >= i32(frames)) {
      continue;
    }
    let fbase = base + u32(f) * p.{{SRC}}s_t;
    let wa = wbase + a * p.ws_t;
    for (var b = 0u; b < p.kh; b++) {
      let hx = h0 + i32(b * p.dh);
      if (hx < 0 || hx >= i32(p.h)) {
        continue;
      }
      let row = fbase + u32(hx) * p.{{SRC}}s_h;
      for (var k = 0u; k < p.kw; k++) {
        let wx = w0 + i32(k * p.dw);
        // Each output position's source offset so<j> (and, for several positions, whether it is inside: in<j>).
        {{COLUMNS}}
        let wi = wa + b * p.ws_h + k * p.ws_w;
        for (var c = 0u; c < p.cg; c++) {
          let cs = c * p.{{SRC}}s_c;
          {{LOADS}}
          let q = wi + c * p.ws_c;
          {{ACC_FMA}}
        }
      }
    }
  }
  return acc;
}
