// Element j of row `row` of an fft input view [R0, R1, L] (real) or [R0, R1, L, 2] (complex), as INPUT reads it:
// 0 complex, 1 real, 2 Hermitian (bins 0..n/2 stored; the rest conjugates; imaginary parts of bin 0 and bin n/2
// dropped). p.in_len: the stored elements the transform reads (past them, zeros).
fn load_input(row: u32, j: u32) -> vec2<f32> {
  var jj = j;
  var mirrored = false;
  if (INPUT == 2u && 2u * j > p.n) {
    jj = p.n - j;
    mirrored = true;
  }
  if (jj >= p.in_len) {
    return vec2<f32>(0.0);
  }
  let at = p.x_off + (row / p.r1) * p.x_s0 + (row % p.r1) * p.x_s1 + jj * p.x_sj;
  if (INPUT == 1u) {
    return vec2<f32>(load_x(at), 0.0);
  }
  var v = vec2<f32>(load_x(at), load_x(at + p.x_sc));
  if (INPUT == 2u && (jj == 0u || 2u * jj == p.n)) {
    v.y = 0.0;
  }
  return conj_if(v, mirrored);
}
