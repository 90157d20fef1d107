// Direct convolution over [N, C, T, H, W] (a 2-D convolution is T = 1, kt = 1): one output word (1 or 2 packed
// elements) per invocation, f32 accumulation, no workgroup memory and no barriers. x, weight and bias are read
// through their strides, so views need no copy. Padding is never materialized: a window position outside the input
// is skipped by a bounds check, which is what reading a zero would add. padBefore shifts the window; padding after
// the input only made the output larger (the launcher sized it), and those positions fail the same check.

struct Params {
  n: u32,      // output elements
  o: u32,      // output channels
  to: u32,
  ho: u32,
  wo: u32,
  cg: u32,     // input channels per group
  og: u32,     // output channels per group
  t: u32,
  h: u32,
  w: u32,
  kt: u32,
  kh: u32,
  kw: u32,
  st: u32,
  sh: u32,
  sw: u32,
  dt: u32,
  dh: u32,
  dw: u32,
  pt: i32,     // zeros before each spatial dim
  ph: i32,
  pw: i32,
  x_off: u32,
  xs_n: u32,
  xs_c: u32,
  xs_t: u32,
  xs_h: u32,
  xs_w: u32,
  w_off: u32,
  ws_o: u32,
  ws_c: u32,
  ws_t: u32,
  ws_h: u32,
  ws_w: u32,
  b_off: u32,
  bs: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> xbuf: array<u32>;
@group(0) @binding(3) var<storage, read> wbuf: array<u32>;
{{BIAS_BINDING}}

{{FUNCTIONS}}

fn element(e: u32) -> f32 {
  var r = e;
  let ow = r % p.wo;
  r /= p.wo;
  let oh = r % p.ho;
  r /= p.ho;
  let ot = r % p.to;
  r /= p.to;
  let oc = r % p.o;
  let n = r / p.o;
  var acc = {{BIAS}};
  let xbase = p.x_off + n * p.xs_n + (oc / p.og) * p.cg * p.xs_c;
  let wbase = p.w_off + oc * p.ws_o;
  let t0 = i32(ot * p.st) - p.pt;
  let h0 = i32(oh * p.sh) - p.ph;
  let w0 = i32(ow * p.sw) - p.pw;
  for (var a = 0u; a < p.kt; a++) {
    let tx = t0 + i32(a * p.dt);
    if (tx < 0 || tx >= i32(p.t)) {
      continue;
    }
    for (var b = 0u; b < p.kh; b++) {
      let hx = h0 + i32(b * p.dh);
      if (hx < 0 || hx >= i32(p.h)) {
        continue;
      }
      for (var k = 0u; k < p.kw; k++) {
        let wx = w0 + i32(k * p.dw);
        if (wx < 0 || wx >= i32(p.w)) {
          continue;
        }
        let xo = xbase + u32(tx) * p.xs_t + u32(hx) * p.xs_h + u32(wx) * p.xs_w;
        let wi = wbase + a * p.ws_t + b * p.ws_h + k * p.ws_w;
        for (var c = 0u; c < p.cg; c++) {
          acc = fma(load_x(xo + c * p.xs_c), load_w(wi + c * p.ws_c), acc);
        }
      }
    }
  }
  return acc;
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let w = linear_index(gid, nwg, {{WG}}u);
  let first = w * {{LANES}}u;
  if (first >= p.n) {
    return;
  }
  var word = 0u;
  for (var l = 0u; l < {{LANES}}u; l++) {
    let e = first + l;
    if (e < p.n) {
      word |= encode_out(element(e)) << (l * {{BITS}}u);
    }
  }
  out[w] = word;
}
