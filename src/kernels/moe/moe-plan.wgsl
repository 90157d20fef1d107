// The routing plan of the grouped expert GEMM (expert-gemm.wgsl), built on the GPU in one workgroup so the expert
// ids are never read back: a counting sort of the T*k slots by expert (workgroup atomics), each expert's segment
// padded to a whole number of BM-row tiles (padding rows hold SENTINEL), and the expert of every tile. Slots with
// an id outside 0..E-1 form one more bucket, E, whose tiles the GEMM writes as zeros.
//
// plan (u32): [0] used tiles | [1, 1 + max_tiles) expert of each tile | then max_tiles * BM sorted slot indices.
// Within an expert the slots land in atomic order; each output row is computed alone, so results do not depend on it.
// The header (params, bindings, WG, BM, MAX_BUCKETS) comes from the description in moe-plan.ts.

const SENTINEL = 0xffffffffu;

var<workgroup> counts: array<atomic<u32>, MAX_BUCKETS>;
var<workgroup> cursor: array<atomic<u32>, MAX_BUCKETS>;
var<workgroup> row0: array<u32, MAX_BUCKETS>;   // first sorted row of each bucket's segment

fn bucket(s: u32) -> u32 {
  let id = ids[p.ids_off + (s / p.slots) * p.ids_s0 + (s % p.slots) * p.ids_s1];
  return min(id, p.experts); // negative ids are huge as u32
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
  let buckets = p.experts + 1u;
  let t = lid.x;
  for (var b = t; b < buckets; b += WG) {
    atomicStore(&counts[b], 0u);
    atomicStore(&cursor[b], 0u);
  }
  workgroupBarrier();
  for (var s = t; s < p.total; s += WG) {
    atomicAdd(&counts[bucket(s)], 1u);
  }
  workgroupBarrier();
  // An exclusive scan of the padded counts; at most E + 1 steps, cheap next to the slot loops.
  if (t == 0u) {
    var row = 0u;
    for (var b = 0u; b < buckets; b++) {
      row0[b] = row;
      row += (atomicLoad(&counts[b]) + BM - 1u) / BM * BM;
    }
    plan[0] = row / BM;
  }
  workgroupBarrier();
  let sorted = 1u + p.max_tiles;
  for (var b = t; b < buckets; b += WG) {
    let c = atomicLoad(&counts[b]);
    let padded = (c + BM - 1u) / BM * BM;
    for (var i = c; i < padded; i++) {
      plan[sorted + row0[b] + i] = SENTINEL;
    }
    for (var i = 0u; i < padded / BM; i++) {
      plan[1u + row0[b] / BM + i] = b;
    }
  }
  for (var s = t; s < p.total; s += WG) {
    let b = bucket(s);
    plan[sorted + row0[b] + atomicAdd(&cursor[b], 1u)] = s;
  }
}
