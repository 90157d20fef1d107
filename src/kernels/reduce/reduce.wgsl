// Reduces the middle dim of a contiguous [outer, size, inner] input. One workgroup per output word: its
// invocations stride over the reduced dim, then combine in workgroup memory. Argmax/argmin keep the first index of
// the extreme, and a NaN counts as the extreme (torch semantics). C is the input's compute type, R the result's;
// the header comes from the description in webgpu.ts, with reduce_pair (workgroup-reduce.wgsl): the tree over
// (bits of the value, index) pairs, combined by `combine`.

// Combines (v, i) into the running (a, ai); returns the winner (the value's bits and the index).
fn combine(a: C, ai: u32, v: C, vi: u32) -> vec2<u32> {
{{COMBINE}}
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let w = wid.x + wid.y * nwg.x;
  let t = lid.x;
  var word = 0u;
  for (var l = 0u; l < LANES; l++) {
    let o = w * LANES + l;
    // Workgroup-uniform condition: every invocation takes the same branch, so the barriers below are legal.
    if (o < p.n_out) {
      let base = p.offset + (o / p.inner) * p.size * p.inner + o % p.inner;
      var a: C = {{INIT}};
      var ai = 0xffffffffu;
      for (var j = t; j < p.size; j += WG) {
        let r = combine(a, ai, load_x(base + j * p.inner), j);
        a = bitcast<C>(r.x);
        ai = r.y;
      }
      let best = reduce_pair(t, vec2<u32>(bitcast<u32>(a), ai));
      if (t == 0u) {
        word |= encode_out({{RESULT}}) << (l * BITS);
      }
    }
  }
  if (t == 0u && w * LANES < p.n_out) {
    out[w] = word;
  }
}
