// First pass of indexAdd (the scatter-add behind indexSelect's backward): links the positions of equal index
// values into chains in increasing order, so that the second pass (index-add.wgsl) can sum them without atomics
// (WGSL has no float atomics) and in one fixed order. For every position i < p.t holding a value v in [0, size):
// head[v] = the first such i (atomicMin on u32, an order-independent result) and next[i] = the next position
// holding v, or END. Out-of-range values join no chain. Each workgroup reads the index in tiles of WG through
// workgroup memory from its own first position to the end: at most t^2 / 2 integer compares in all, no float work.
// The header (params, bindings, WG) comes from the description in webgpu.ts.

const END = 0xffffffffu;

var<workgroup> tile: array<i32, WG>;

fn index_at(i: u32) -> i32 {
  return idx[p.idx_off + i * p.idx_stride];
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let first = (wid.x + wid.y * nwg.x) * WG;
  let i = first + lid.x;
  var v = -1;
  var linked = false;
  if (i < p.t) {
    v = index_at(i);
    linked = v >= 0 && u32(v) < p.size;
    if (linked) {
      atomicMin(&head[u32(v)], i);
    }
  }
  var found = END;
  // Uniform bounds: every invocation takes part in every tile's barriers, whatever it has found.
  for (var start = first; start < p.t; start += WG) {
    let j = start + lid.x;
    var w = -1;
    if (j < p.t) {
      w = index_at(j);
    }
    tile[lid.x] = w;
    workgroupBarrier();
    if (linked && found == END) {
      let count = min(WG, p.t - start);
      for (var k = 0u; k < count; k++) {
        if (start + k > i && tile[k] == v) {
          found = start + k;
          break;
        }
      }
    }
    workgroupBarrier();
  }
  if (i < p.t) {
    next[i] = found;
  }
}
