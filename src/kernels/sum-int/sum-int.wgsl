// The int64 sum of an int32 / uint8 / bool / int64 tensor along one dim of a contiguous [outer, size, inner] view,
// one workgroup per output element (torch sums integers into int64): each invocation adds its workgroup-strided part
// in 64-bit two's complement (vec2<u32>: low, high word), the parts merge by the fixed tree of workgroup-reduce.wgsl,
// and invocation 0 writes the two words, wrapping modulo 2^64 as torch.
// The header (params, bindings, load64, WG, add64, sum64) comes from the descriptions in webgpu.ts.

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let o = wid.x + wid.y * nwg.x;
  // Every invocation of a workgroup takes part in the tree, so no early return before it.
  let live = o < p.outputs;
  let t = lid.x;
  let base = p.x_off + (o / p.inner) * p.size * p.inner + o % p.inner;
  var acc = vec2<u32>(0u, 0u);
  if (live) {
    for (var j = t; j < p.size; j += WG) {
      acc = add64(acc, load64(base + j * p.inner));
    }
  }
  let total = sum64(t, acc);
  if (t != 0u || !live) {
    return;
  }
  out[2u * o] = total.x;
  out[2u * o + 1u] = total.y;
}
