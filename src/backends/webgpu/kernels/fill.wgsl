// Sets every word of a buffer to one packed value (the element code repeated across the word's lanes).

struct Params {
  words: u32,
  word: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

{{FUNCTIONS}}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let w = linear_index(gid, nwg, {{WG}}u);
  if (w < p.words) {
    out[w] = p.word;
  }
}
