// Cross-entropy backward, one output element e of d logits [rows, d] (row-major, in the output dtype):
// (exp(x - lse[row]) - onehot(target)) * scale[row], from the logits (read through their strides), the forward's
// float32 logsumexp and the per-row upstream gradient `scale` (any float dtype, stride 0 for a broadcast scalar).
// Ignored rows take scale 0, so their gradient is 0 (NaN where the row's logits hold a NaN, as torch gives); a
// target outside [0, d) that is not ignored gives NaN, as the forward's loss for that row. Nothing of size
// [rows, d] but the output is written. The header and the one-word-per-invocation loop come from the description
// in webgpu.ts.

fn cross_entropy_grad_at(e: u32) -> f32 {
  let row = e / p.d;
  let j = e % p.d;
  let label = targets[p.t_off + row * p.t_stride];
  let x = load_x(p.x_off + row * p.row_stride + j * p.col_stride);
  let prob = exp_below_max(x - lse[p.lse_off + row]);
  let ignored = label == p.ignore_index;
  if (!ignored && (label < 0 || u32(label) >= p.d)) {
    return f32_bits(0x7fc00000u);
  }
  let hot = select(0.0, 1.0, !ignored && u32(label) == j);
  let scale = select(load_scale(p.s_off + row * p.s_stride), 0.0, ignored);
  // A NaN probability stays NaN times a zero scale (bit test: the compiler may assume floats are never NaN).
  return select((prob - hot) * scale, prob, is_nan(prob));
}
