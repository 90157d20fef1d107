// Reduction for short reduced dims (size <= 64) with many outputs: one invocation per output word folds its
// lanes' rows serially, instead of a workgroup per output word idling most of its invocations.

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

fn combine(a: {{C}}, ai: u32, v: {{C}}, vi: u32) -> vec2<u32> {
{{COMBINE}}
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let w = linear_index(gid, nwg, 64u);
  if (w * {{LANES}}u >= p.n_out) {
    return;
  }
  var word = 0u;
  for (var l = 0u; l < {{LANES}}u; l++) {
    let o = w * {{LANES}}u + l;
    if (o < p.n_out) {
      let base = p.offset + (o / p.inner) * p.size * p.inner + o % p.inner;
      var a: {{C}} = {{INIT}};
      var ai = 0xffffffffu;
      for (var j = 0u; j < p.size; j++) {
        let r = combine(a, ai, load0(base + j * p.inner), j);
        a = bitcast<{{C}}>(r.x);
        ai = r.y;
      }
      let acc_v = a;
      let acc_i = ai;
      word |= encode_out({{RESULT}}) << (l * {{BITS}}u);
    }
  }
  out[w] = word;
}
