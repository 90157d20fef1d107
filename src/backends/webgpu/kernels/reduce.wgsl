// Reduces the middle dim of a contiguous [outer, size, inner] input. One workgroup per output word: its
// invocations stride over the reduced dim, then combine in workgroup memory. Argmax/argmin keep the first index of
// the extreme, and a NaN counts as the extreme (torch semantics).

struct Params {
  n_out: u32,
  size: u32,
  inner: u32,
  offset: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> in0: array<u32>;

{{FUNCTIONS}}

var<workgroup> acc_v: array<{{C}}, {{WG}}>;
var<workgroup> acc_i: array<u32, {{WG}}>;

// Combines (v, i) into the running (a, ai); returns the winner. `better` is the op's strict preference.
fn combine(a: {{C}}, ai: u32, v: {{C}}, vi: u32) -> vec2<u32> {
{{COMBINE}}
}

@compute @workgroup_size({{WG}})
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let w = wid.x + wid.y * nwg.x;
  let t = lid.x;
  var word = 0u;
  for (var l = 0u; l < {{LANES}}u; l++) {
    let o = w * {{LANES}}u + l;
    // Workgroup-uniform condition: every invocation takes the same branch, so the barriers below are legal.
    if (o < p.n_out) {
      let base = p.offset + (o / p.inner) * p.size * p.inner + o % p.inner;
      var a: {{C}} = {{INIT}};
      var ai = 0xffffffffu;
      for (var j = t; j < p.size; j += {{WG}}u) {
        let r = combine(a, ai, load0(base + j * p.inner), j);
        a = bitcast<{{C}}>(r.x);
        ai = r.y;
      }
      acc_v[t] = a;
      acc_i[t] = ai;
      workgroupBarrier();
      for (var s = {{WG}}u / 2u; s > 0u; s >>= 1u) {
        if (t < s) {
          let r = combine(acc_v[t], acc_i[t], acc_v[t + s], acc_i[t + s]);
          acc_v[t] = bitcast<{{C}}>(r.x);
          acc_i[t] = r.y;
        }
        workgroupBarrier();
      }
      if (t == 0u) {
        word |= encode_out({{RESULT}}) << (l * {{BITS}}u);
      }
      workgroupBarrier();
    }
  }
  if (t == 0u && w * {{LANES}}u < p.n_out) {
    out[w] = word;
  }
}
