// An exact integer sum along one dim of a contiguous [outer, size, inner] tensor, one workgroup per output element:
// each invocation adds its workgroup-strided part in 64-bit two's complement (vec2<u32>: low, high word), the parts
// merge by the fixed tree of workgroup-reduce.wgsl, and invocation 0 writes the int32 result, or, when it does not
// fit int32 (torch would return int64), reports it in the device error flag (device-error.ts).
// The header (params, bindings, load_x, WG, add64, sum64, report_error64) comes from the description in webgpu.ts.

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
      let v = load_x(base + j * p.inner);
      acc = add64(acc, vec2<u32>(bitcast<u32>(v), select(0u, 0xffffffffu, v < 0)));
    }
  }
  let total = sum64(t, acc);
  if (t != 0u || !live) {
    return;
  }
  let fits = (total.y == 0u && total.x < 0x80000000u) || (total.y == 0xffffffffu && total.x >= 0x80000000u);
  if (!fits) {
    report_error64(ERR_OP, total);
  }
  out[o] = bitcast<i32>(total.x);
}
