// The weight gradient of the MoE expert-indexed linear layer, every expert in one dispatch: for the stacked weight
// W [E, N, K] of out[s] = x_row(s) . W[ids[s]]^T, grad[e] = sum over the slots s that chose e of
// combine[s] * g_row(s)^T outer x_row(s), [N, K] per expert (linear's g^T x, restricted to each expert's slots).
// The slots come grouped by expert from the routing plan (moe-plan.wgsl): its tile -> expert list is non-decreasing,
// so a binary search finds expert e's segment of the sorted slot list without a read back. Modelled on gemm.wgsl:
// a 64 x 64 tile of grad[e] per workgroup of 16 x 16 invocations, each accumulating a 4 x 4 block in f32 over
// chunks of TS slots staged in workgroup memory. An expert no slot chose loops zero times: exact zeros. The header
// (params, bindings, load_g/load_x, BM, BN, BK) comes from the description in expert-weight-grad.ts.

const TS = 16u;
const SENTINEL = 0xffffffffu;

var<workgroup> g_tile: array<f32, 1024>; // [TS][BN]
var<workgroup> x_tile: array<f32, 1024>; // [TS][BK]

@compute @workgroup_size(16, 16)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let e = wid.z;
  let n0 = wid.y * BN;
  let c0 = wid.x * BK;
  // Expert e's tiles [first, end) of the plan (uniform: read-only storage at workgroup-uniform indices).
  let used = plan[0];
  var lo = 0u;
  var hi = used;
  while (lo < hi) {
    let mid = (lo + hi) / 2u;
    if (plan[1u + mid] < e) {
      lo = mid + 1u;
    } else {
      hi = mid;
    }
  }
  let first = lo;
  hi = used;
  while (lo < hi) {
    let mid = (lo + hi) / 2u;
    if (plan[1u + mid] <= e) {
      lo = mid + 1u;
    } else {
      hi = mid;
    }
  }
  let sorted = 1u + p.max_tiles;
  let row_end = sorted + lo * BM;
  let t = lid.y * 16u + lid.x;
  // Each invocation stages column t % 64 of chunk rows t / 64 + 4 q (q < 4): consecutive invocations read
  // consecutive elements of a g row and of an x row.
  let col = t % 64u;
  let j0 = t / 64u;
  var acc: array<vec4<f32>, 4>;
  for (var r0 = sorted + first * BM; r0 < row_end; r0 += TS) {
    // A segment's padding comes last: a chunk that starts with it has no slot left.
    if (plan[r0] == SENTINEL) {
      break;
    }
    for (var q = 0u; q < 4u; q++) {
      let j = j0 + 4u * q;
      let slot = plan[r0 + j];
      var gv = 0.0;
      var xv = 0.0;
      if (slot != SENTINEL) {
        let token = slot / p.slots;
        if (n0 + col < p.n) {
          gv = load_g(p.g_off + select(token, slot, p.g_per_slot != 0u) * p.g_s0 + (n0 + col) * p.g_s1) * slot_weight(token, slot % p.slots);
        }
        if (c0 + col < p.k) {
          xv = load_x(p.x_off + select(token, slot, p.x_per_slot != 0u) * p.x_s0 + (c0 + col) * p.x_s1);
        }
      }
      g_tile[j * BN + col] = gv;
      x_tile[j * BK + col] = xv;
    }
    workgroupBarrier();
    for (var j = 0u; j < TS; j++) {
      let xo = j * BK + lid.x * 4u;
      let xv = vec4<f32>(x_tile[xo], x_tile[xo + 1u], x_tile[xo + 2u], x_tile[xo + 3u]);
      let go = j * BN + lid.y * 4u;
      acc[0] += g_tile[go] * xv;
      acc[1] += g_tile[go + 1u] * xv;
      acc[2] += g_tile[go + 2u] * xv;
      acc[3] += g_tile[go + 3u] * xv;
    }
    workgroupBarrier();
  }
  let cc = c0 + lid.x * 4u;
  for (var i = 0u; i < 4u; i++) {
    let n = n0 + lid.y * 4u + i;
    if (n < p.n) {
      let row = (e * p.n + n) * p.k;
      for (var j = 0u; j < 4u; j++) {
        if (cc + j < p.k) {
          out[row + cc + j] = acc[i][j];
        }
      }
    }
  }
}
