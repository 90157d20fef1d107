// FP8 quantization of a contiguous [rows, cols] tensor in blocks of bh x bw (128x128 weight blocks, 1x128
// activation groups, 1xcols rows) in two dispatches instead of a chain of elementwise ops and reductions:
// `amax` gives one workgroup per block and writes its dequantization scale max(amax, 1e-12) / fmax (NaN if the
// block holds a NaN); `encode` gives one invocation per output word and writes round(x / scale), saturated.
// The header (params, bindings, load_x/encode_out, WG for amax, ENCODE_WG, block_amax: the tree of
// workgroup-reduce.wgsl over amax_combine) comes from the description in webgpu.ts.

// NaN wins, as torch's max does.
fn amax_combine(a: f32, b: f32) -> f32 {
  return select(max(a, b), f32_bits(0x7fc00000u), is_nan(a) || is_nan(b));
}

@compute @workgroup_size(WG)
fn amax(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let b = wid.x + wid.y * nwg.x;
  let t = lid.x;
  // Uniform per workgroup, so the barriers below are reached by all or none.
  if (b >= p.n_blocks) {
    return;
  }
  let r0 = (b / p.kb) * p.bh;
  let c0 = (b % p.kb) * p.bw;
  let h = min(p.bh, p.rows - r0);
  let w = min(p.bw, p.cols - c0);
  var a = 0.0;
  for (var e = t; e < h * w; e += WG) {
    a = amax_combine(a, abs(load_x(p.x_off + (r0 + e / w) * p.cols + c0 + e % w)));
  }
  let m = block_amax(t, a);
  if (t == 0u) {
    scale[b] = select(max(m, 1e-12), m, is_nan(m)) / p.fmax;
  }
}

@compute @workgroup_size(ENCODE_WG)
fn encode(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let wi = linear_index(gid, nwg, ENCODE_WG);
  let n = p.rows * p.cols;
  if (wi * 4u >= n) {
    return;
  }
  var word = 0u;
  for (var l = 0u; l < 4u; l++) {
    let e = wi * 4u + l;
    if (e < n) {
      let r = e / p.cols;
      let c = e % p.cols;
      let s = scale[(r / p.bh) * p.kb + c / p.bw];
      word |= encode_out(load_x(p.x_off + e) / s) << (l * 8u);
    }
  }
  out[wi] = word;
}
