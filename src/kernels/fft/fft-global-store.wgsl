// Global-memory FFT, last step: bin k of each row from the work buffer (times the chirp for Bluestein) through
// store_output. One invocation per bin kept.
fn fft_store_at(i: u32) {
  let row = i / p.out_bins;
  let k = i % p.out_bins;
  let e = row * SIZE + k;
  var v = vec2<f32>(work[2u * e], work[2u * e + 1u]);
  if (BLUESTEIN) {
    v = cmul(v, chirp(k));
  }
  store_output(row, k, v);
}
