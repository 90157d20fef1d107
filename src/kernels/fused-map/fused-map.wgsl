// A fused chain of elementwise ops (fused-map/webgpu.ts generates `compute`, the loads and the stores): each
// invocation computes 4 consecutive elements, so every output's words are whole whatever its dtype packs (1, 2 or 4
// to a word), then stores them; aligned 32-bit inputs and outputs move a vec4 of words at a time. Every op encodes its value to its own dtype's code and the next decodes it, as the ops one by one
// would through memory; for float32 the pair is a bitcast the compiler removes.

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let first = linear_index(gid, nwg, WG) * 4u;
  if (first >= p.n) {
    return;
  }
{{LOADS}}
  var r: array<Codes, 4>;
  for (var j = 0u; j < 4u; j++) {
    if (first + j < p.n) {
      r[j] = {{ELEMENT}};
    }
  }
{{STORES}}
}
