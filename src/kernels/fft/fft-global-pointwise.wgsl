// Global-memory Bluestein: the forward transform of the chirped row times the chirp's FFT, in place.
fn fft_pointwise_at(i: u32) {
  let v = cmul(vec2<f32>(out[2u * i], out[2u * i + 1u]), chirp_fft(i % SIZE));
  out[2u * i] = v.x;
  out[2u * i + 1u] = v.y;
}
