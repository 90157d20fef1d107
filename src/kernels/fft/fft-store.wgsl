// Bin k of row `row` (R0 = row / R1, R1 = row mod R1) at element r0 o_s0 + r1 o_s1 + k o_sk of out, times p.scale,
// as OUTPUT says: 0 complex pair, 1 real part, 2 power |X|^2, 3 magnitude |X|.
fn store_output(row: u32, k: u32, v: vec2<f32>) {
  let at = (row / p.r1) * p.o_s0 + (row % p.r1) * p.o_s1 + k * p.o_sk;
  let s = v * p.scale;
  if (OUTPUT == 0u) {
    out[2u * at] = s.x;
    out[2u * at + 1u] = s.y;
  } else if (OUTPUT == 1u) {
    out[at] = s.x;
  } else {
    let power = s.x * s.x + s.y * s.y;
    out[at] = select(sqrt(power), power, OUTPUT == 2u);
  }
}
