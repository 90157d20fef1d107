// Tiled batched GEMM with fp32 accumulation: a 64x64 output tile per workgroup of 256 invocations (16x16), each
// computing a 4x4 block from 64x16 / 16x64 tiles of A and B. The B tile is staged in workgroup memory; the A tile
// is too, or, in the subgroup variant (A_* from gemm.ts), held in registers and passed around with subgroupShuffle.
// Operands are strided views (a transposed [N,K] weight needs no copy) of any dtype, dequantized on load (FP8
// included, with per-block scales when given); per-tensor/per-row scales, bias and the output cast happen in the
// epilogue.

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

// a[gr, gk] of the batch at a_base, or zero outside the matrix (a tile's padding).
fn load_a_or_zero(gr: u32, gk: u32, a_base: u32) -> f32 {
  if (gr < p.m && gk < p.k) {
    return load_a(a_base + gr * p.a_sm + gk * p.a_sk, gr, gk);
  }
  return 0.0;
}

const TM = 64u;
const TN = 64u;
const TK = 16u;

{{A_STORAGE}}
var<workgroup> b_tile: array<f32, 1024>; // [TK][TN]

// One dimension: subgroupLayoutIsLinear checked, for this workgroup shape, that subgroups are aligned runs of
// consecutive invocations. Invocation t = ty * 16 + tx computes rows ty * 4.. and columns tx * 4.. of the tile.
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>{{SUBGROUP_BUILTINS}}) {
  let tx = t % 16u;
  let ty = t / 16u;
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
  var acc: array<vec4<f32>, 4>;
  for (var k0 = 0u; k0 < p.k; k0 += TK) {
    // 256 invocations load the 1024 elements of the B tile, 4 apiece; out-of-range elements are zero.
    for (var q = 0u; q < 4u; q++) {
      let idx = t + q * 256u;
      let gbk = k0 + idx / TN;
      let gc = col0 + idx % TN;
      var bv = 0.0;
      if (gbk < p.k && gc < p.n) {
        bv = load_b(b_base + gbk * p.b_sk + gc * p.b_sn, gbk, gc);
      }
      b_tile[idx] = bv;
    }
{{A_LOAD}}
    workgroupBarrier();
{{A_REGISTERS}}
    for (var kk = 0u; kk < TK; kk++) {
      let bo = kk * TN + tx * 4u;
      let bv = vec4<f32>(b_tile[bo], b_tile[bo + 1u], b_tile[bo + 2u], b_tile[bo + 3u]);
{{A_MULTIPLY}}
    }
    workgroupBarrier();
  }
  let out_base = wid.z * p.m * p.n;
  let c0 = col0 + tx * 4u;
  for (var i = 0u; i < 4u; i++) {
    let r = row0 + ty * 4u + i;
    if (r < p.m) {
      let row = out_base + r * p.n;
{{STORE}}
    }
  }
}
