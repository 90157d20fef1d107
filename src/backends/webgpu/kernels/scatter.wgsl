// Writes a strided source into a strided view of existing storage (cat, slice assignment), converting dtype.
// One invocation per element; sub-word dtypes are merged into their word with atomics, because neighbouring
// elements of a view may belong to different invocations.

struct Params {
  n: u32,
  rank: u32,
  off0: u32,   // source offset
  off1: u32,   // destination offset
  shape: array<vec4<u32>, 2>,
  strides0: array<vec4<u32>, 2>,
  strides1: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<{{OUT_ELEM}}>;
@group(0) @binding(2) var<storage, read> in0: array<u32>;

{{FUNCTIONS}}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let e = linear_index(gid, nwg, {{WG}}u);
  if (e >= p.n) {
    return;
  }
  let code = encode_out(load0(strided_offset(e, p.off0, p.rank, p.shape, p.strides0)));
  let d = strided_offset(e, p.off1, p.rank, p.shape, p.strides1);
{{STORE}}
}
