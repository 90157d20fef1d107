// The contiguous fast path of elementwise.wgsl: every input is contiguous (1-D after coalescing), a single
// broadcast element or a number, and every dtype is 32-bit, so element e is word e and no stride arithmetic is
// needed. One invocation maps 4 words, with vec4 loads/stores where the bindings allow (elementwise.ts): a
// software adapter pays per instruction and per invocation, a GPU per memory transaction. FULL and TAIL (from
// elementwise.ts): where every buffer holds the whole last vec4, the last invocation maps a whole vec4 as well
// and there is no tail code at all (on SwiftShader any tail branch costs every invocation); otherwise it maps the
// 1-3 words of the tail one at a time, unrolled. `map_word` (codes in, the output code out) is generated.

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let v = linear_index(gid, nwg, WG);
  let base = v * 4u;
  if ({{FULL}}) {
{{MAP4}}
  }{{TAIL}}
}
