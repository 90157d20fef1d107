// Helpers shared by generated kernels. NaN checks work on bits: WGSL lets float comparisons assume no NaN.

fn is_nan(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

// float -> int32 like the CPU backend: truncate toward zero, saturate, NaN -> 0 (WGSL leaves NaN undefined).
fn i32_from_f32(x: f32) -> i32 {
  if (is_nan(x)) {
    return 0;
  }
  if (x >= 2147483647.0) {
    return 2147483647;
  }
  if (x <= -2147483648.0) {
    return -2147483647 - 1;
  }
  return i32(x);
}

// Linear invocation index over a grid folded into x and y (see grid1d).
fn linear_index(gid: vec3<u32>, nwg: vec3<u32>, wg_size: u32) -> u32 {
  return gid.x + gid.y * nwg.x * wg_size;
}

// A float from its bits at run time: WGSL rejects Inf/NaN in constant expressions, a function call is not one.
fn f32_bits(b: u32) -> f32 {
  return bitcast<f32>(b);
}

// Storage offset of element e (row-major over `shape`, `rank` <= 8 dims) of a strided view starting at `base`.
fn strided_offset(e: u32, base: u32, rank: u32, shape: array<vec4<u32>, 2>, strides: array<vec4<u32>, 2>) -> u32 {
  var rem = e;
  var off = base;
  for (var d = i32(rank) - 1; d >= 0; d--) {
    let size = shape[d / 4][d % 4];
    off += (rem % size) * strides[d / 4][d % 4];
    rem /= size;
  }
  return off;
}

// exp(x) for x <= 0, exactly 0 far below (and for -Inf) whatever the GPU's exp does there (softmax weights).
fn exp_nonpos(x: f32) -> f32 {
  return select(exp(x), 0.0, x < -88.0);
}
