// SwiGLU of a contiguous [rows, 2I] input: out[r, i] = silu(x[r, i]) * x[r, I + i], one invocation per output word
// (each element of a packed word is computed on its own, so rows may share words).

struct Params {
  n: u32,
  half: u32,
  offset: u32,
  _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> in0: array<u32>;

{{FUNCTIONS}}

fn swiglu_at(e: u32) -> f32 {
  let row = e / p.half;
  let a = load0(p.offset + e + row * p.half);
  let b = load0(p.offset + e + (row + 1u) * p.half);
  // exp(NaN) is not NaN on every driver (SwiftShader: Inf), so NaN gates pass it through.
  let ea = select(exp(-a), a, is_nan(a));
  return a / (1.0 + ea) * b;
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let w = linear_index(gid, nwg, 256u);
  let first = w * {{LANES}}u;
  if (first >= p.n) {
    return;
  }
  var word = 0u;
  for (var l = 0u; l < {{LANES}}u; l++) {
    if (first + l < p.n) {
      word |= encode_out(swiglu_at(first + l)) << (l * {{BITS}}u);
    }
  }
  out[w] = word;
}
