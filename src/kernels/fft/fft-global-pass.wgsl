// Global-memory FFT: one Stockham pass (radix p.radix, span p.span; see fft-workgroup-passes.wgsl) from src to
// out, one invocation per butterfly of every row. p.inverse flips the twiddles (Bluestein runs both directions).
fn fft_pass_at(i: u32) {
  let r = p.radix;
  let count = SIZE / r;
  let row = i / count;
  let b = i % count;
  let k = b % p.span;
  let step = SIZE / (p.span * r);
  let inverse = p.inverse != 0u;
  let base_in = row * SIZE;
  var regs: array<vec2<f32>, 5>;
  for (var j = 0u; j < r; j++) {
    let e = base_in + b + j * count;
    regs[j] = cmul(vec2<f32>(src[2u * e], src[2u * e + 1u]), twiddle(j * k * step, inverse));
  }
  let base_out = base_in + (b - k) * r + k;
  let y = small_dft(regs, r, SIZE, inverse);
  for (var q = 0u; q < r; q++) {
    let e = base_out + q * p.span;
    out[2u * e] = y[q].x;
    out[2u * e + 1u] = y[q].y;
  }
}
