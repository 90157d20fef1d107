// Workgroup-wide merge of every invocation's online-softmax state (m, s) (WG is the including kernel's workgroup
// size): reduce_states is the tree of workgroup-reduce.wgsl over merge, instantiated with this file by
// softmaxWorkgroupWgsl() in webgpu.ts. The result is read with workgroupUniformLoad: callers branch on it around
// barriers.
fn reduce_state(t: u32, m: f32, s: f32) -> vec2<f32> {
  return reduce_states(t, vec2<f32>(m, s));
}
