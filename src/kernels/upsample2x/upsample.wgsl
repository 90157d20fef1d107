// 2x upsampling of H and W of a strided 5-D view x [N, C, T, H, W] (torch F.interpolate, scale_factor 2): element e
// of the contiguous output; each invocation writes one output word (2W is even, so a word never spans two rows),
// no workgroup memory. Bilinear uses align_corners=false: source position (o + 0.5) / 2 - 0.5 = o / 2 - 0.25,
// clamped at 0, whose weights 0.25 / 0.75 are exact in f32. The header and the one-word-per-invocation loop come
// from the description in webgpu.ts.

// Lower source index, upper source index and the upper one's weight along a dim of `size`.
fn tap(o: u32, size: u32) -> vec3<f32> {
  let src = max(f32(o) * 0.5 - 0.25, 0.0);
  let i0 = u32(src);
  return vec3<f32>(f32(i0), f32(min(i0 + 1u, size - 1u)), src - f32(i0));
}

fn upsample_at(e: u32) -> f32 {
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
  {{SAMPLE}}
}
