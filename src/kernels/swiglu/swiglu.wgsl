// SwiGLU of a contiguous [rows, 2I] input: out[r, i] = silu(x[r, i]) * x[r, I + i]. The header (params, bindings,
// load_x/encode_out) and the one-word-per-invocation loop come from the description in webgpu.ts; each element of
// a packed word is computed on its own, so rows may share words.

fn swiglu_at(e: u32) -> f32 {
  let row = e / p.half;
  let a = load_x(p.offset + e + row * p.half);
  let b = load_x(p.offset + e + (row + 1u) * p.half);
  // exp(NaN) is not NaN on every driver (SwiftShader: Inf), so NaN gates pass it through.
  let ea = select(exp(-a), a, is_nan(a));
  return a / (1.0 + ea) * b;
}
