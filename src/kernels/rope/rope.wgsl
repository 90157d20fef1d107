// Rotary embedding, rotate-half layout, of a strided x [S, H, D] into a contiguous output, one invocation per output
// word. Element (s, h, c) at position pos = offset + s, with half = R / 2 (the tables' width; R = D, or R < D for
// partial rotary) and i = c mod half:
//   c <  half:          x[c] cos[pos, i] - x[c + half] sin[pos, i]
//   half <= c < 2 half: x[c] cos[pos, i] + x[c - half] sin[pos, i]
//   c >= 2 half:        x[c]
// Elements of one packed word are computed independently, so any D (even) and any S, H work. The header and the
// one-word-per-invocation loop come from the description in webgpu.ts.

fn rope_at(e: u32) -> f32 {
  let c = e % p.d;
  let sh = e / p.d;
  let s = sh / p.h;
  let hh = sh % p.h;
  let row = p.x_off + s * p.xs0 + hh * p.xs1;
  if (c >= 2u * p.half) {
    return load_x(row + c * p.xs2);
  }
  let i = c % p.half;
  let pos = p.pos0 + s;
  let cs = cos_t[p.cos_off + pos * p.cs0 + i * p.cs1];
  let sn = sin_t[p.sin_off + pos * p.ss0 + i * p.ss1];
  let x = load_x(row + c * p.xs2);
  if (c < p.half) {
    return x * cs - load_x(row + (c + p.half) * p.xs2) * sn;
  }
  return x * cs + load_x(row + i * p.xs2) * sn;
}
