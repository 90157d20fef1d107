// One output word per invocation (1, 2 or 4 packed elements), so packed dtypes are written without races.
// Inputs are read through strided views: broadcasting (stride 0), transposes and slices need no copy first.

struct Params {
  n: u32,      // output elements
  rank: u32,   // dims of the (coalesced) iteration shape, <= 8
  off0: u32,
  off1: u32,
  shape: array<vec4<u32>, 2>,
  strides0: array<vec4<u32>, 2>,
  strides1: array<vec4<u32>, 2>,
  scalar: u32, // storage code of a number operand (float32 bits or int32)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
{{INPUT_BINDINGS}}

{{FUNCTIONS}}

fn compute(e: u32) -> {{OUT_C}} {
{{BODY}}
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
      word |= encode_out(compute(e)) << (l * {{BITS}}u);
    }
  }
  out[w] = word;
}
