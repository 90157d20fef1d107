// RMS norm over the channel dim (Wan's RMS_norm) of a strided 5-D view x [N, C, T, H, W]: one invocation per
// column of output words, i.e. per (n, LANES consecutive positions), which loops over C twice: the sums of squares
// of its LANES positions, then the scaled values, one output word per channel. Each input element is read twice and
// no sum is shared between invocations, so there is no workgroup memory and no barrier. Packed outputs need S a
// multiple of LANES (the launcher casts from float32 otherwise), so a word never spans two channels. The header and
// the one-invocation-per-column loop come from the description in webgpu.ts.

// Storage offset of x[n, 0, position sp].
fn position_offset(n: u32, sp: u32) -> u32 {
  let iw = sp % p.w;
  let r = sp / p.w;
  let ih = r % p.h;
  let it = r / p.h;
  return p.x_off + n * p.xs_n + it * p.xs_t + ih * p.xs_h + iw * p.xs_w;
}

// One column: the LANES positions from sp0 of batch n, over every channel.
fn norm_column(col: u32) {
  let per_n = p.s / LANES;
  let n = col / per_n;
  let sp0 = (col % per_n) * LANES;
  var base: array<u32, LANES>;
  var inv: array<f32, LANES>;
  for (var l = 0u; l < LANES; l++) {
    base[l] = position_offset(n, sp0 + l);
    var sq = 0.0;
    for (var c = 0u; c < p.c; c++) {
      let v = load_x(base[l] + c * p.xs_c);
      sq = fma(v, v, sq);
    }
    inv[l] = 1.0 / sqrt(sq / f32(p.c) + p.eps);
  }
  let first = n * p.c * p.s + sp0;
  for (var c = 0u; c < p.c; c++) {
    var word = 0u;
    for (var l = 0u; l < LANES; l++) {
      let y = load_x(base[l] + c * p.xs_c) * inv[l];
      let v = {{APPLY_WEIGHT}};
      word |= encode_out({{ACTIVATION}}) << (l * BITS);
    }
    out[(first + c * p.s) / LANES] = word;
  }
}
