// The combine step of the grouped expert GEMM: out[t, n] = sum_j combine[t, j] * slot_out[t * k + j, n] over the
// slots with an in-range expert id (as the GEMV path, which skips the others). One output word per invocation
// (1 or 2 packed elements, which may straddle rows), so 16-bit outputs need no atomics and no f32 copy.

struct Params {
  t: u32,
  n: u32,
  slots: u32,
  experts: u32,
  words: u32,        // output words
  ids_off: u32,
  ids_s0: u32,
  ids_s1: u32,
  c_off: u32,
  c_s0: u32,
  c_s1: u32,
  _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> slot_out: array<f32>;
@group(0) @binding(3) var<storage, read> ids: array<u32>;
@group(0) @binding(4) var<storage, read> comb: array<u32>;

{{FUNCTIONS}}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let w = linear_index(gid, nwg, 256u);
  if (w >= p.words) {
    return;
  }
  var word = 0u;
  for (var l = 0u; l < {{LANES}}u; l++) {
    let i = w * {{LANES}}u + l;
    if (i < p.t * p.n) {
      let tok = i / p.n;
      let col = i % p.n;
      var acc = 0.0;
      for (var j = 0u; j < p.slots; j++) {
        if (ids[p.ids_off + tok * p.ids_s0 + j * p.ids_s1] < p.experts) {
          acc += bitcast<f32>(comb[p.c_off + tok * p.c_s0 + j * p.c_s1]) * slot_out[(tok * p.slots + j) * p.n + col];
        }
      }
      word |= encode_out(acc) << (l * {{BITS}}u);
    }
  }
  out[w] = word;
}
