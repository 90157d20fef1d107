// Shared by the chunked Gated DeltaNet passes (webgpu-chunked.ts): activations as the recurrent kernel
// computes them, and where token t's q and k (after conv + SiLU + l2 norm) live in the qk scratch.

fn silu(x: f32) -> f32 {
  return x / (1.0 + exp(-x));
}

// torch's softplus (threshold 20).
fn softplus(x: f32) -> f32 {
  return select(log(1.0 + exp(x)), x, x > 20.0);
}

// Index of q (k follows at + dk) of token t (in this segment) as value head h sees it. The first head_rows tokens,
// whose conv windows reach into the conv state, have one copy per value head, because each value head keeps its
// own copy of its key head's conv inputs (equal when the states came from this op, but an initial state may be
// anything); later tokens are stored once per key head.
fn qk_base(t: u32, h: u32) -> u32 {
  if (t < p.head_rows) {
    return (t * p.hv + h) * 2u * p.dk;
  }
  return (p.head_rows * p.hv + (t - p.head_rows) * p.hk + h / (p.hv / p.hk)) * 2u * p.dk;
}
