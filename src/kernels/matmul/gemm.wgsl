// Tiled batched GEMM with fp32 accumulation: a 64x64 output tile per workgroup, from 64x16 / 16x64 tiles of A and
// B. Plain variant: 64 invocations (8x8), each an 8x8 register block, reading A (stored transposed) and B from
// workgroup memory as vec4s: 4 vec4 loads feed 64 multiply-adds. Subgroup variant (A_* from gemm.ts): 256
// invocations with 4x4 blocks, A held in registers and passed around with subgroupShuffle. gemm.ts unrolls the
// K step and the store (MULTIPLY, STORE), so the accumulators are registers and the inner loop has no index
// arithmetic or bounds checks; tiles wholly inside the matrices load without bounds checks either.
// Operands are strided views (a transposed [N,K] weight needs no copy) of any dtype, dequantized on load (FP8
// included, with per-block scales when given; a packed 4-bit b by (k, n) with its group scale and zero, the
// act-order permutation applied to A's columns through a_col); per-tensor/per-row scales, bias and the output cast happen in the
// epilogue. The header (params, bindings, load_a/load_b/encode_out, a_value/b_value, epilogue, RM/RN/SW) comes
// from the description in gemm.ts.

// a[gr, gk] of the batch at a_base, or zero outside the matrix (a tile's padding).
fn load_a_or_zero(gr: u32, gk: u32, a_base: u32) -> f32 {
  if (gr < p.m && gk < p.k) {
    return a_value(a_base + gr * p.a_sm + a_col(gk) * p.a_sk, gr, gk);
  }
  return 0.0;
}

// The 4 consecutive-column values b[gk, gc..gc+3] (zero outside the matrix unless `inside`).
fn load_b4(b_base: u32, gk: u32, gc: u32, inside: bool) -> vec4<f32> {
  let i = b_base + gk * p.b_sk + gc * p.b_sn;
  if (inside) {
    return vec4<f32>(b_value(i, gk, gc), b_value(i + p.b_sn, gk, gc + 1u), b_value(i + 2u * p.b_sn, gk, gc + 2u), b_value(i + 3u * p.b_sn, gk, gc + 3u));
  }
  var v = vec4<f32>();
  if (gk < p.k) {
    for (var j = 0u; j < 4u; j++) {
      if (gc + j < p.n) {
        v[j] = b_value(i + j * p.b_sn, gk, gc + j);
      }
    }
  }
  return v;
}

// The 4 consecutive-row values a[gr..gr+3, gk] (zero outside the matrix unless `inside`).
fn load_a4(a_base: u32, gr: u32, gk: u32, inside: bool) -> vec4<f32> {
  var i = a_base + gr * p.a_sm;
  if (gk < p.k) {
    i += a_col(gk) * p.a_sk;
  }
  if (inside) {
    return vec4<f32>(a_value(i, gr, gk), a_value(i + p.a_sm, gr + 1u, gk), a_value(i + 2u * p.a_sm, gr + 2u, gk), a_value(i + 3u * p.a_sm, gr + 3u, gk));
  }
  var v = vec4<f32>();
  if (gk < p.k) {
    for (var j = 0u; j < 4u; j++) {
      if (gr + j < p.m) {
        v[j] = a_value(i + j * p.a_sm, gr + j, gk);
      }
    }
  }
  return v;
}

const TM = 64u;
const TN = 64u;
const TK = 16u;
// RM x RN: an invocation's register block; WG = (TM / RM) * (TN / RN) invocations.

{{A_STORAGE}}
var<workgroup> b_tile: array<vec4<f32>, 256>; // [TK][TN / 4]

// One dimension: subgroupLayoutIsLinear checked, for this workgroup shape, that subgroups are aligned runs of
// consecutive invocations. Invocation t = ty * (TN / RN) + tx computes rows ty * RM.. and columns tx * RN.. of
// the tile.
@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>{{SUBGROUP_BUILTINS}}) {
  let tx = t % (TN / RN);
  let ty = t / (TN / RN);
  // Batch offsets of a and b from the batch index (broadcast dims have stride 0).
  var rem = wid.z;
  var a_base = p.a_off;
  var b_base = p.b_off;
  for (var d = i32(p.batch_rank) - 1; d >= 0; d--) {
    let i = rem % p.batch_shape[0][d];
    rem /= p.batch_shape[0][d];
    a_base += i * p.a_sbatch[0][d];
    b_base += i * p.b_sbatch[0][d];
  }
  let row0 = wid.y * TM;
  let col0 = wid.x * TN;
  let inside_mn = row0 + TM <= p.m && col0 + TN <= p.n;
  var acc: array<vec4<f32>, RM * RN / 4u>;
  for (var k0 = 0u; k0 < p.k; k0 += TK) {
    // Uniform across the workgroup: a tile wholly inside the matrices skips the per-element bounds checks.
    let inside = inside_mn && k0 + TK <= p.k;
    // The B tile's 256 vec4s (4 consecutive columns at one k), 256 / WG apiece; out-of-range elements are zero.
    for (var q = 0u; q < 256u / WG; q++) {
      let idx = t + q * WG;
      b_tile[idx] = load_b4(b_base, k0 + idx / 16u, col0 + (idx % 16u) * 4u, inside);
    }
{{A_LOAD}}
    workgroupBarrier();
{{A_REGISTERS}}
{{MULTIPLY}}
    workgroupBarrier();
  }
  let out_base = wid.z * p.m * p.n;
  let c0 = col0 + tx * RN;
{{STORE}}
}
