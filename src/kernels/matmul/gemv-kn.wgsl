// Decode GEMV over a [K, N] weight (N contiguous: the layout of TF.js's and ONNX Runtime's MatMul, and of x @ W
// with W stored [in, out]): out[m, n] = sum_k a[m, k] * w[k, n] for M <= 4 activation rows. An invocation owns CPI
// adjacent output columns (one 16-byte chunk of a weight row: 4 f32, 8 bf16/f16, 16 FP8) and the k rows
// kl, kl + KL, ...; the CG column groups of a workgroup are adjacent, so each weight row is read coalesced, 16
// bytes an invocation, and every weight byte once. The KL k lanes are split-K inside the workgroup: gemv-kn.ts
// raises KL (4..64) until there are enough workgroups for a GPU when N is small, and the lanes' partial sums meet
// in a fixed tree (the same bits every run, whatever the batch). Unaligned views read element by element (CPI = 4).
// The header (params, bindings, load_x/load_w/encode_out, decode_w, a_vec, block_scale, epilogue, CPI, CG, KL)
// comes from the description in gemv-kn.ts; DECLARE, ACCUMULATE and REDUCE_STORE are unrolled there, so the CPI
// accumulators stay registers.

var<workgroup> red: array<vec4<f32>, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let wg = wid.x + wid.y * nwg.x;
  let cg = lid.x % CG;
  let kl = lid.x / CG;
  let g = wg * CG + cg;
  let n0 = g * CPI;
{{LUT_FILL}}
{{DECLARE}}
  if (g < p.groups) {
    for (var k = kl; k < p.k; k += KL) {
      let av = a_vec(k){{BLOCK_SCALE}};
{{ACCUMULATE}}
    }
  }
{{REDUCE_STORE}}
}
