// Global-memory FFT, first step: value j of row `row` into the work buffer (rows of SIZE complex values), times the
// chirp and zero-padded for Bluestein. One invocation per value.
fn fft_load_at(i: u32) {
  let row = i / SIZE;
  let j = i % SIZE;
  var v = vec2<f32>(0.0);
  if (BLUESTEIN) {
    if (j < p.n) {
      v = cmul(load_input(row, j), chirp(j));
    }
  } else {
    v = load_input(row, j);
  }
  out[2u * i] = v.x;
  out[2u * i + 1u] = v.y;
}
