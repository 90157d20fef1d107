// 2x upsampling of H and W of a strided 5-D view x [N, C, T, H, W] (torch F.interpolate, scale_factor 2): one
// invocation per output word (1 or 2 packed elements; 2W is even, so a word never spans two rows), no workgroup
// memory. Bilinear uses align_corners=false: source position (o + 0.5) / 2 - 0.5 = o / 2 - 0.25, clamped at 0, whose
// weights 0.25 / 0.75 are exact in f32.

struct Params {
  n: u32,      // output elements
  c: u32,
  t: u32,
  h: u32,
  w: u32,
  x_off: u32,
  xs_n: u32,
  xs_c: u32,
  xs_t: u32,
  xs_h: u32,
  xs_w: u32,
  _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> xbuf: array<u32>;

{{FUNCTIONS}}

// Lower source index, upper source index and the upper one's weight along a dim of `size`.
fn tap(o: u32, size: u32) -> vec3<f32> {
  let src = max(f32(o) * 0.5 - 0.25, 0.0);
  let i0 = u32(src);
  return vec3<f32>(f32(i0), f32(min(i0 + 1u, size - 1u)), src - f32(i0));
}

fn element(e: u32) -> f32 {
  let wo = 2u * p.w;
  let ho = 2u * p.h;
  let ow = e % wo;
  var r = e / wo;
  let oh = r % ho;
  r /= ho;
  let it = r % p.t;
  r /= p.t;
  let ic = r % p.c;
  let n = r / p.c;
  let plane = p.x_off + n * p.xs_n + ic * p.xs_c + it * p.xs_t;
  {{BODY}}
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let wi = linear_index(gid, nwg, {{WG}}u);
  let first = wi * {{LANES}}u;
  if (first >= p.n) {
    return;
  }
  var word = 0u;
  for (var l = 0u; l < {{LANES}}u; l++) {
    word |= encode_out(element(first + l)) << (l * {{BITS}}u);
  }
  out[wi] = word;
}
