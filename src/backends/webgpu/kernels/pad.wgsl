// out = F.pad(x): one output word (1, 2 or 4 packed elements) per invocation, storage codes copied unconverted, so
// every dtype pads the same way. Each element's coordinates come from its linear index (u32 divisions per dim),
// never from the workgroup grid, so no dim's size (H*W >= 65536 included) meets a grid or 16-bit limit.

struct Params {
  n: u32,          // output elements
  rank: u32,       // <= 8
  x_off: u32,
  fill: u32,       // the constant's storage code
  out_shape: array<vec4<u32>, 2>,
  in_shape: array<vec4<u32>, 2>,
  strides: array<vec4<u32>, 2>,
  before: array<vec4<i32>, 2>,  // negative = crop
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<u32>;

fn read_code(e: u32) -> u32 {
  return (x[e / {{LANES}}u] >> ((e % {{LANES}}u) * {{BITS}}u)) & {{MASK}}u;
}

// Input position for output coordinate o of dim d; constant mode answers -1 outside the input.
fn source(o: u32, d: u32) -> i32 {
  let size = i32(p.in_shape[d / 4u][d % 4u]);
  let i = i32(o) - p.before[d / 4u][d % 4u];
  if (i >= 0 && i < size) {
    return i;
  }
  {{OUTSIDE}}
}

fn element(e: u32) -> u32 {
  var rem = e;
  var off = p.x_off;
  for (var d = i32(p.rank) - 1; d >= 0; d--) {
    let du = u32(d);
    let size = p.out_shape[du / 4u][du % 4u];
    let i = source(rem % size, du);
    if (i < 0) {
      return p.fill;
    }
    off += u32(i) * p.strides[du / 4u][du % 4u];
    rem /= size;
  }
  return read_code(off);
}

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
      word |= element(e) << (l * {{BITS}}u);
    }
  }
  out[w] = word;
}
