// Complex helpers and the Stockham passes of the FFT kernels (fft-plan.ts describes the algorithm; the CPU runs the
// same passes in float64). Complex values are vec2<f32> (re, im); tables hold float32-rounded float64 values, so no
// kernel evaluates sin or cos.

fn cmul(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
  return vec2<f32>(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

fn conj_if(v: vec2<f32>, flip: bool) -> vec2<f32> {
  return select(v, vec2<f32>(v.x, -v.y), flip);
}

fn table_at(i: u32) -> vec2<f32> {
  return vec2<f32>(tables[2u * i], tables[2u * i + 1u]);
}

// exp(-+2 pi i t / SIZE) for t < SIZE (twiddles lead the table).
fn twiddle(t: u32, inverse: bool) -> vec2<f32> {
  return conj_if(table_at(t), inverse);
}

// Bluestein's chirp w_j = exp(-+i pi j^2 / n) and the FFT of its conjugate (the 1/m folded in).
fn chirp(j: u32) -> vec2<f32> {
  return conj_if(table_at(SIZE + j), INVERSE);
}

fn chirp_fft(j: u32) -> vec2<f32> {
  return conj_if(table_at(SIZE + p.n + j), INVERSE);
}
