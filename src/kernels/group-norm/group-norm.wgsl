// Group norm (torch F.group_norm) of a strided 5-D view x [N, C, T, H, W]: one workgroup per (n, group), whose
// data is cg = C / groups channels x S = T*H*W positions, contiguous in the output. Three passes over the group in
// one dispatch: the mean (each invocation's share summed with Kahan compensation, then a tree in workgroup memory),
// the biased variance as the mean of (x - mean)^2 (two-pass: no cancellation of sum(x^2) - n mean^2), then the
// normalized, weighted and shifted values written a word at a time. The launcher only picks a packed output when
// each group is whole words (cg * S a multiple of lanes), else it computes float32 and casts. The header comes from
// the description in webgpu.ts, with workgroup_sum(t, v): the sum over the workgroup of each invocation's v, which
// every invocation gets (the tree of workgroup-reduce.wgsl, its scratch reusable at once).

// Element e of the group whose first channel is c0 in batch n.
fn load_at(n: u32, c0: u32, e: u32) -> f32 {
  let c = c0 + e / p.s;
  let sp = e % p.s;
  let iw = sp % p.w;
  let r = sp / p.w;
  let ih = r % p.h;
  let it = r / p.h;
  return load_x(p.x_off + n * p.xs_n + c * p.xs_c + it * p.xs_t + ih * p.xs_h + iw * p.xs_w);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let group = wid.x + wid.y * nwg.x;
  // Uniform per workgroup, so every invocation of a live workgroup reaches the barriers.
  if (group >= p.groups) {
    return;
  }
  let t = lid.x;
  let n = group / p.num_groups;
  let c0 = (group % p.num_groups) * p.cg;
  let count = p.cg * p.s;

  var sum = 0.0;
  var comp = 0.0;
  for (var e = t; e < count; e += WG) {
    let y = load_at(n, c0, e) - comp;
    let next = sum + y;
    comp = (next - sum) - y;
    sum = next;
  }
  let mean = workgroup_sum(t, sum) / f32(count);

  var sq = 0.0;
  comp = 0.0;
  for (var e = t; e < count; e += WG) {
    let d = load_at(n, c0, e) - mean;
    let y = d * d - comp;
    let next = sq + y;
    comp = (next - sq) - y;
    sq = next;
  }
  let rstd = 1.0 / sqrt(workgroup_sum(t, sq) / f32(count) + p.eps);

  let first = group * count;
  for (var j = t * LANES; j < count; j += WG * LANES) {
    var word = 0u;
    for (var l = 0u; l < LANES; l++) {
      let e = j + l;
      let c = c0 + e / p.s;
      let y = (load_at(n, c0, e) - mean) * rstd;
      word |= encode_out({{AFFINE}}) << (l * BITS);
    }
    out[(first + j) / LANES] = word;
  }
}
