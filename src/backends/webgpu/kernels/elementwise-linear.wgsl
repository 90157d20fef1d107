// The contiguous fast path of elementwise.wgsl: every input is contiguous (1-D after coalescing), a single
// broadcast element or a number, and every dtype is 32-bit, so element e is word e and no stride arithmetic is
// needed. One invocation maps 4 words, with vec4 loads/stores where the bindings allow (elementwise.ts): a
// software adapter pays per instruction and per invocation, a GPU per memory transaction. The last invocation
// maps the 1-3 words of the tail one at a time.

struct Params {
  n: u32,      // output words (= elements)
  off0: u32,   // input 0's first word; in vec4s when it is bound as array<vec4<u32>>
  off1: u32,
  scalar: u32, // storage code of a number operand (float32 bits or int32)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<{{OUT_WORD}}>;
{{INPUT_BINDINGS}}

{{FUNCTIONS}}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let v = linear_index(gid, nwg, {{WG}}u);
  let base = v * 4u;
  if (base + 4u <= p.n) {
{{MAP4}}
    return;
  }
  for (var e = base; e < p.n; e++) {
{{MAP1}}
  }
}
