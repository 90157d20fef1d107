// Whether subgroups hold consecutive invocations of a 1-D workgroup (WGSL does not promise it; the subgroup
// reductions rely on it): each invocation writes 1 when its lane and its subgroup's first invocation fit that
// layout. The header comes from the description in subgroup-probe.ts.

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) li: u32, @builtin(subgroup_invocation_id) lane: u32, @builtin(subgroup_size) size: u32) {
  let first = subgroupBroadcastFirst(li);
  out[li] = select(0u, 1u, lane == li % size && first == li - lane);
}
