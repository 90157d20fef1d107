// LFM2's gated short convolution over a contiguous in_proj output bcx [S, 3H] (B | C | x): Bx = B * x, a depthwise
// causal conv of Bx over time with L taps (w[c, L-1] multiplies the current token), then C * conv. The L-1 Bx
// values before the first token come from `state` [L-1, H] (zeros before a sequence's first token), and the last
// L-1 Bx values are written back to it, so prefill and each decode step are one dispatch with no roll or copy.
// One invocation per channel walks the S tokens in order with a window of the last L-1 Bx values in registers.
// The header and the one-invocation-per-channel loop come from the description in webgpu.ts.

// Channel i % H of sequence i / H over its rows (all S tokens for one sequence).
fn conv_channel(i: u32) {
  let c = i % p.h;
  let seq = i / p.h;
  let window = p.taps - 1u;
{{SEGMENT}}
  var win: array<f32, MAX_WINDOW>;  // oldest first
  for (var k = 0u; k < window; k++) {
    win[k] = state[st + k * p.h + c];
  }
  let wrow = p.w_off + c * p.w_s0;
  var taps: array<f32, MAX_WINDOW>;  // the channel's past taps, read once for all S tokens
  for (var k = 0u; k < window; k++) {
    taps[k] = load_conv_w(wrow + k * p.w_s1);
  }
  let w_now = load_conv_w(wrow + window * p.w_s1);
  let b = {{BIAS}};
  for (var r = 0u; r < rows; r++) {
    let t = first + r;
    let row = p.in_off + t * 3u * p.h;
    let bx = load_bcx(row + c) * load_bcx(row + 2u * p.h + c);
    var y = b;
    for (var k = 0u; k < window; k++) {
      y += taps[k] * win[k];
    }
    y += w_now * bx;
    for (var k = 0u; k + 1u < window; k++) {
      win[k] = win[k + 1u];
    }
    if (window > 0u) {
      win[window - 1u] = bx;
    }
    out[t * p.h + c] = load_bcx(row + p.h + c) * y;
  }
  for (var k = 0u; k < window; k++) {
    state[st + k * p.h + c] = win[k];
  }
}
