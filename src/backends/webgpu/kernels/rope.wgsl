// Rotary embedding, rotate-half layout, of a strided x [S, H, D] into a contiguous output, one invocation per output
// word. Element (s, h, c) at position pos = offset + s, with half = D / 2 and i = c mod half:
//   c <  half: x[c] cos[pos, i] - x[c + half] sin[pos, i]
//   c >= half: x[c] cos[pos, i] + x[c - half] sin[pos, i]
// Elements of one packed word are computed independently, so any D (even) and any S, H work.

struct Params {
  n: u32,
  h: u32,
  d: u32,
  half: u32,
  x_off: u32,
  xs0: u32,
  xs1: u32,
  xs2: u32,
  cos_off: u32,
  cs0: u32,
  cs1: u32,
  sin_off: u32,
  ss0: u32,
  ss1: u32,
  pos0: u32,
  _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> in0: array<u32>;
@group(0) @binding(3) var<storage, read> cos_t: array<f32>;
@group(0) @binding(4) var<storage, read> sin_t: array<f32>;

{{FUNCTIONS}}

fn rope_at(e: u32) -> f32 {
  let c = e % p.d;
  let sh = e / p.d;
  let s = sh / p.h;
  let hh = sh % p.h;
  let row = p.x_off + s * p.xs0 + hh * p.xs1;
  let i = c % p.half;
  let pos = p.pos0 + s;
  let cs = cos_t[p.cos_off + pos * p.cs0 + i * p.cs1];
  let sn = sin_t[p.sin_off + pos * p.ss0 + i * p.ss1];
  let x = load0(row + c * p.xs2);
  if (c < p.half) {
    return x * cs - load0(row + (c + p.half) * p.xs2) * sn;
  }
  return x * cs + load0(row + i * p.xs2) * sn;
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let w = linear_index(gid, nwg, 256u);
  let first = w * {{LANES}}u;
  if (first >= p.n) {
    return;
  }
  var word = 0u;
  for (var l = 0u; l < {{LANES}}u; l++) {
    if (first + l < p.n) {
      word |= encode_out(rope_at(first + l)) << (l * {{BITS}}u);
    }
  }
  out[w] = word;
}
