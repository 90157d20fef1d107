// out = x.gather(dim, index): out[..., j, ...] = x[..., index[..., j, ...], ...] along dim. One output word per
// invocation; codes are copied raw. The x view handed in has the index's shape with a zero stride on dim, so
// strided_offset gives every coordinate but dim's, which comes from the index. Out-of-range indices give zero.

struct Params {
  n: u32,
  rank: u32,
  x_off: u32,
  idx_off: u32,
  shape: array<vec4<u32>, 2>,     // index (= output) shape
  x_strides: array<vec4<u32>, 2>, // dim's stride zeroed
  idx_strides: array<vec4<u32>, 2>,
  dim_size: u32,
  dim_stride: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<u32>;
@group(0) @binding(3) var<storage, read> idx: array<u32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let w = linear_index(gid, nwg, {{WG}}u);
  let first = w * {{LANES}}u;
  if (first >= p.n) {
    return;
  }
  var word = 0u;
  for (var l = 0u; l < {{LANES}}u; l++) {
    let e = first + l;
    if (e < p.n) {
      let id = bitcast<i32>(idx[strided_offset(e, p.idx_off, p.rank, p.shape, p.idx_strides)]);
      if (id >= 0 && u32(id) < p.dim_size) {
        let s = strided_offset(e, p.x_off, p.rank, p.shape, p.x_strides) + u32(id) * p.dim_stride;
        word |= ((x[s / {{LANES}}u] >> ((s % {{LANES}}u) * {{BITS}}u)) & {{MASK}}u) << (l * {{BITS}}u);
      }
    }
  }
  out[w] = word;
}
