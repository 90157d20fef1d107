// out = x.index_select(dim, index), x viewed as contiguous [outer, d, inner]. One output word per invocation;
// elements are copied as raw codes (no dtype conversion). An index outside [0, d) yields a zero element: the GPU
// cannot raise, and reading the indices back to check them would stall the queue.

struct Params {
  n: u32,       // output elements
  d: u32,       // size of the indexed dim
  inner: u32,
  n_idx: u32,
  x_off: u32,
  idx_off: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<u32>;
@group(0) @binding(3) var<storage, read> idx: array<u32>;

fn read_code(e: u32) -> u32 {
  return (x[e / {{LANES}}u] >> ((e % {{LANES}}u) * {{BITS}}u)) & {{MASK}}u;
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let w = linear_index(gid, nwg, {{WG}}u);
  let first = w * {{LANES}}u;
  if (first >= p.n) {
    return;
  }
  let row = p.n_idx * p.inner;
  var word = 0u;
  for (var l = 0u; l < {{LANES}}u; l++) {
    let e = first + l;
    if (e < p.n) {
      let o = e / row;
      let r = e % row;
      let id = bitcast<i32>(idx[p.idx_off + r / p.inner]);
      if (id >= 0 && u32(id) < p.d) {
        word |= read_code(p.x_off + (o * p.d + u32(id)) * p.inner + r % p.inner) << (l * {{BITS}}u);
      }
    }
  }
  out[w] = word;
}
