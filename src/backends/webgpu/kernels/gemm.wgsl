// Tiled batched GEMM with fp32 accumulation: a 64x64 output tile per workgroup of 16x16 invocations, each computing
// a 4x4 block from 64x16 / 16x64 tiles staged in workgroup memory. Operands are strided views (a transposed [N,K]
// weight needs no copy) of any dtype, dequantized on load (FP8 included, with per-block scales when given);
// per-tensor/per-row scales, bias and the output cast happen in the epilogue.

struct Params {
  m: u32,
  n: u32,
  k: u32,
  batch_rank: u32,
  a_off: u32,
  a_sm: u32,
  a_sk: u32,
  b_off: u32,
  b_sk: u32,
  b_sn: u32,
  k_blocks: u32,     // ceil(k / 128): row length of block-scale tables
  _pad: u32,
  batch_shape: vec4<u32>,
  a_sbatch: vec4<u32>,
  b_sbatch: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> in0: array<u32>;
@group(0) @binding(3) var<storage, read> in1: array<u32>;
{{EXTRA_BINDINGS}}

{{FUNCTIONS}}

const TM = 64u;
const TN = 64u;
const TK = 16u;

var<workgroup> a_tile: array<f32, 1024>; // [TM][TK]
var<workgroup> b_tile: array<f32, 1024>; // [TK][TN]

@compute @workgroup_size(16, 16)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  // Batch offsets of a and b from the batch index (broadcast dims have stride 0).
  var rem = wid.z;
  var a_base = p.a_off;
  var b_base = p.b_off;
  for (var d = i32(p.batch_rank) - 1; d >= 0; d--) {
    let i = rem % p.batch_shape[d];
    rem /= p.batch_shape[d];
    a_base += i * p.a_sbatch[d];
    b_base += i * p.b_sbatch[d];
  }
  let row0 = wid.y * TM;
  let col0 = wid.x * TN;
  let t = lid.y * 16u + lid.x;
  var acc: array<vec4<f32>, 4>;
  for (var k0 = 0u; k0 < p.k; k0 += TK) {
    // 256 invocations load 1024 elements of each tile, 4 apiece; out-of-range elements are zero.
    for (var q = 0u; q < 4u; q++) {
      let idx = t + q * 256u;
      let gr = row0 + idx / TK;
      let gk = k0 + idx % TK;
      var av = 0.0;
      if (gr < p.m && gk < p.k) {
        av = load_a(a_base + gr * p.a_sm + gk * p.a_sk, gr, gk);
      }
      a_tile[idx] = av;
      let gbk = k0 + idx / TN;
      let gc = col0 + idx % TN;
      var bv = 0.0;
      if (gbk < p.k && gc < p.n) {
        bv = load_b(b_base + gbk * p.b_sk + gc * p.b_sn, gbk, gc);
      }
      b_tile[idx] = bv;
    }
    workgroupBarrier();
    for (var kk = 0u; kk < TK; kk++) {
      let bo = kk * TN + lid.x * 4u;
      let bv = vec4<f32>(b_tile[bo], b_tile[bo + 1u], b_tile[bo + 2u], b_tile[bo + 3u]);
      let ao = lid.y * 4u * TK + kk;
      acc[0] += a_tile[ao] * bv;
      acc[1] += a_tile[ao + TK] * bv;
      acc[2] += a_tile[ao + 2u * TK] * bv;
      acc[3] += a_tile[ao + 3u * TK] * bv;
    }
    workgroupBarrier();
  }
  let out_base = wid.z * p.m * p.n;
  let c0 = col0 + lid.x * 4u;
  for (var i = 0u; i < 4u; i++) {
    let r = row0 + lid.y * 4u + i;
    if (r < p.m) {
      let row = out_base + r * p.n;
{{STORE}}
    }
  }
}
