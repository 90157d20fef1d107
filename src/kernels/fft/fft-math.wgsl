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

// The r-point DFT of a (r <= 5) with twiddles exp(-+2 pi i jq / r): radix 2 and 4 as add/subtract butterflies (no
// multiplications; -i z is a swap), 3 and 5 from the table.
fn small_dft(a: array<vec2<f32>, 5>, r: u32, size: u32, inverse: bool) -> array<vec2<f32>, 5> {
  var y: array<vec2<f32>, 5>;
  if (r == 2u) {
    y[0] = a[0] + a[1];
    y[1] = a[0] - a[1];
    return y;
  }
  if (r == 4u) {
    let s02 = a[0] + a[2];
    let d02 = a[0] - a[2];
    let s13 = a[1] + a[3];
    let d13 = a[1] - a[3];
    let rot = select(vec2<f32>(d13.y, -d13.x), vec2<f32>(-d13.y, d13.x), inverse);
    y[0] = s02 + s13;
    y[1] = d02 + rot;
    y[2] = s02 - s13;
    y[3] = d02 - rot;
    return y;
  }
  let count = size / r;
  for (var q = 0u; q < r; q++) {
    var acc = a[0];
    for (var j = 1u; j < r; j++) {
      acc += cmul(a[j], twiddle(((j * q) % r) * count, inverse));
    }
    y[q] = acc;
  }
  return y;
}
