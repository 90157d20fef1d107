// RMS norm over the channel dim (Wan's RMS_norm) of a strided 5-D view x [N, C, T, H, W]: one invocation per
// column of output words, i.e. per (n, LANES consecutive positions), which loops over C twice: the sums of squares
// of its LANES positions, then the scaled values, one output word per channel. Each input element is read twice and
// no sum is shared between invocations, so there is no workgroup memory and no barrier. Packed outputs need S a
// multiple of LANES (the launcher casts from float32 otherwise), so a word never spans two channels.

struct Params {
  columns: u32, // N * S / LANES
  c: u32,
  s: u32,       // T * H * W
  h: u32,
  w: u32,
  x_off: u32,
  xs_n: u32,
  xs_c: u32,
  xs_t: u32,
  xs_h: u32,
  xs_w: u32,
  w_off: u32,
  ws: u32,
  eps: f32,
  _pad0: u32,
  _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> xbuf: array<u32>;
{{WEIGHT_BINDING}}

{{FUNCTIONS}}

// Storage offset of x[n, 0, position sp].
fn position_offset(n: u32, sp: u32) -> u32 {
  let iw = sp % p.w;
  let r = sp / p.w;
  let ih = r % p.h;
  let it = r / p.h;
  return p.x_off + n * p.xs_n + it * p.xs_t + ih * p.xs_h + iw * p.xs_w;
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let col = linear_index(gid, nwg, {{WG}}u);
  if (col >= p.columns) {
    return;
  }
  let per_n = p.s / {{LANES}}u;
  let n = col / per_n;
  let sp0 = (col % per_n) * {{LANES}}u;
  var base: array<u32, {{LANES}}>;
  var inv: array<f32, {{LANES}}>;
  for (var l = 0u; l < {{LANES}}u; l++) {
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
    for (var l = 0u; l < {{LANES}}u; l++) {
      let y = load_x(base[l] + c * p.xs_c) * inv[l];
      let v = {{APPLY_WEIGHT}};
      word |= encode_out({{ACTIVATION}}) << (l * {{BITS}}u);
    }
    out[(first + c * p.s) / {{LANES}}u] = word;
  }
}
