// LFM2's gated short convolution over a contiguous in_proj output bcx [S, 3H] (B | C | x): Bx = B * x, a depthwise
// causal conv of Bx over time with L taps (w[c, L-1] multiplies the current token), then C * conv. The L-1 Bx
// values before the first token come from `state` [L-1, H] (zeros before a sequence's first token), and the last
// L-1 Bx values are written back to it, so prefill and each decode step are one dispatch with no roll or copy.
// One invocation per channel walks the S tokens in order with a window of the last L-1 Bx values in registers.

struct Params {
  s: u32,
  h: u32,
  taps: u32,
  in_off: u32,
  w_off: u32,
  w_s0: u32,
  w_s1: u32,
  st_off: u32,
  b_off: u32,
  _pad0: u32,
  _pad1: u32,
  _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> bcx: array<u32>;
@group(0) @binding(3) var<storage, read> conv_w: array<u32>;
@group(0) @binding(4) var<storage, read_write> state: array<f32>;
{{BIAS_BINDING}}

{{FUNCTIONS}}

const MAX_WINDOW = {{MAX_WINDOW}}u;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let c = linear_index(gid, nwg, 64u);
  if (c >= p.h) {
    return;
  }
  let window = p.taps - 1u;
  var win: array<f32, MAX_WINDOW>;  // oldest first
  for (var k = 0u; k < window; k++) {
    win[k] = state[p.st_off + k * p.h + c];
  }
  let wrow = p.w_off + c * p.w_s0;
  var taps: array<f32, MAX_WINDOW>;  // the channel's past taps, read once for all S tokens
  for (var k = 0u; k < window; k++) {
    taps[k] = load_w(wrow + k * p.w_s1);
  }
  let w_now = load_w(wrow + window * p.w_s1);
  let b = bias(c);
  for (var t = 0u; t < p.s; t++) {
    let row = p.in_off + t * 3u * p.h;
    let bx = load_in(row + c) * load_in(row + 2u * p.h + c);
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
    out[t * p.h + c] = load_in(row + p.h + c) * y;
  }
  for (var k = 0u; k < window; k++) {
    state[p.st_off + k * p.h + c] = win[k];
  }
}
