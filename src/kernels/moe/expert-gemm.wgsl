// Grouped expert GEMM for MoE prefill: the slots sorted by expert (moe-plan.wgsl) form BM-row tiles of one expert
// each, so every tile reads its expert's weight once for up to BM slots instead of once per slot (the GEMV of
// expert-linear.wgsl). Modelled on gemm.wgsl: a 64x64 output tile per workgroup of 16x16 invocations, each
// accumulating a 4x4 block in f32 from 64x16 / 16x64 tiles staged in workgroup memory. A rows are gathered through
// the sorted slot list (x row = slot / k, or slot when x has a row per slot); B comes from W[e] ([N, K] rows,
// dequantized on load, FP8 block scales per element); each output row is scattered to its slot's row of a
// [T*k, N] result. Grid: (max tiles, N tiles); tiles past the plan's used count return at once. A packed 4-bit W
// (b_value) is read by word, each code dequantized with its group's scale and zero; act-order permutes the columns
// of x (a_col). The header (params, bindings, load_x/load_w/encode_out, b_value, a_col, BM, BN) comes from the
// description in expert-gemm.ts.

const TK = 16u;
const SENTINEL = 0xffffffffu;

var<workgroup> a_tile: array<f32, 1024>; // [BM][TK]
var<workgroup> b_tile: array<f32, 1024>; // [TK][BN]

@compute @workgroup_size(16, 16)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let tile = wid.x;
  // Uniform: read-only storage at a workgroup-uniform index.
  if (tile >= plan[0]) {
    return;
  }
  let e = plan[1u + tile];
  let rows = 1u + p.max_tiles + tile * BM; // this tile's slots in plan
  let col0 = wid.y * BN;
  let t = lid.y * 16u + lid.x;
  // Each invocation stages element kk of rows/columns t / TK + 16 q (q < 4) of both tiles: consecutive invocations
  // read consecutive k, contiguous in x rows and in the [N, K] weight rows.
  let kk = t % TK;
  var a_base: array<u32, 4>;
  var a_ok: array<bool, 4>;
  var b_base: array<u32, 4>;
  var b_ok: array<bool, 4>;
  for (var q = 0u; q < 4u; q++) {
    let r = t / TK + 16u * q;
    let slot = plan[rows + r];
    a_ok[q] = slot != SENTINEL;
    a_base[q] = p.x_off + select(slot / p.slots, slot, p.x_per_slot != 0u) * p.x_s0;
    let c = col0 + r;
    b_ok[q] = c < p.n;
    b_base[q] = p.w_off + e * p.w_se + c * p.w_sn;
  }
  // The bucket of out-of-range ids (e == experts) accumulates nothing: its slots get zeros.
  let k_end = select(p.k, 0u, e >= p.experts);
  // An expert's last tile is mostly padding when it has few slots (training batches: a few slots per expert); the
  // invocations whose four rows are all padding still stage tiles and meet the barriers, but skip the products.
  var live = false;
  for (var i = 0u; i < 4u; i++) {
    live = live || plan[rows + lid.y * 4u + i] != SENTINEL;
  }
  var acc: array<vec4<f32>, 4>;
  for (var k0 = 0u; k0 < k_end; k0 += TK) {
    let gk = k0 + kk;
    for (var q = 0u; q < 4u; q++) {
      let r = t / TK + 16u * q;
      var av = 0.0;
      if (a_ok[q] && gk < p.k) {
        av = load_x(a_base[q] + a_col(gk) * p.x_s1);
      }
      a_tile[r * TK + kk] = av;
      var bv = 0.0;
      if (b_ok[q] && gk < p.k) {
        bv = b_value(b_base[q], gk, col0 + r, e);
      }
      b_tile[kk * BN + r] = bv;
    }
    workgroupBarrier();
    for (var j = 0u; j < select(0u, TK, live); j++) {
      let bo = j * BN + lid.x * 4u;
      let bv = vec4<f32>(b_tile[bo], b_tile[bo + 1u], b_tile[bo + 2u], b_tile[bo + 3u]);
      let ao = lid.y * 4u * TK + j;
      acc[0] += a_tile[ao] * bv;
      acc[1] += a_tile[ao + TK] * bv;
      acc[2] += a_tile[ao + 2u * TK] * bv;
      acc[3] += a_tile[ao + 3u * TK] * bv;
    }
    workgroupBarrier();
  }
  let c0 = col0 + lid.x * 4u;
  for (var i = 0u; i < 4u; i++) {
    let slot = plan[rows + lid.y * 4u + i];
    if (slot != SENTINEL) {
      let row = slot * p.n;
{{STORE}}
    }
  }
}
