// Direct convolution over [N, C, T, H, W] (a 2-D convolution is T = 1, kt = 1), f32 accumulation, no workgroup
// memory and no barriers. x, weight, bias and previous are read through their strides, so views need no copy.
// Padding is never materialized: a window position outside the input is skipped by a bounds check, which is what
// reading a zero would add. padBefore shifts the window; padding after the input only made the output larger (the
// launcher sized it), and those positions fail the same check. With previous (P cached frames), time positions
// tx in [-P, 0) read previous[P + tx] instead of being skipped: the causal padding's last P zeros become real frames.
//
// The file is cut into sections at lines `//// name`; conv.ts joins `head`, `taps` (once per input source: x, and
// p for previous, with {{SRC}} filled) and one main:
// - `packed`: one output word (1 or 2 elements) per invocation, Acc = f32; any output dtype.
// - `blocked`: OCB output channels of one group at WB adjacent output columns per invocation (Acc: a struct of
//   vec4 accumulators), so each x value loaded serves OCB fmas and each weight WB; float32 output only. A group's
//   last channel block starts at og - OCB and a row's last column block at wo - WB (overlapping the block before
//   when they do not divide): the overlap is computed twice and written twice with the same bits, and the inner
//   loop needs no channel or column bounds check. A column outside x (padding) loads a clamped position and
//   selects 0 instead.

//// head
struct Params {
  work: u32,   // invocations doing work: output words (packed) or output positions x channel blocks (blocked)
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
  pt: i32,     // zeros before each spatial dim (previous frames included)
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
  np: u32,     // previous frames P (0: none)
  p_off: u32,
  ps_n: u32,
  ps_c: u32,
  ps_t: u32,
  ps_h: u32,
  ps_w: u32,
  groups: u32,
  nb: u32,     // channel blocks per group (blocked)
  nwb: u32,    // column blocks per output row (blocked)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> xbuf: array<u32>;
@group(0) @binding(3) var<storage, read> wbuf: array<u32>;
{{BIAS_BINDING}}
{{PREV_BINDING}}

{{ACC_TYPE}}

{{FUNCTIONS}}

// The whole window: frames inside x from x, frames in [-P, 0) from previous (when bound), the rest skipped.
fn window(xbase: u32, pbase: u32, wbase: u32, t0: i32, h0: i32, w0: i32, acc_in: Acc) -> Acc {
  var acc = acc_in;
  for (var a = 0u; a < p.kt; a++) {
    let tx = t0 + i32(a * p.dt);
    let wa = wbase + a * p.ws_t;
    if (tx >= 0 && tx < i32(p.t)) {
      acc = taps_x(xbase + u32(tx) * p.xs_t, wa, h0, w0, acc);
    }
    {{PREV_TAPS}}
  }
  return acc;
}

//// taps
// One input frame's taps (base: the group's first channel in that frame; wbase: the kernel's frame a). The columns snippet
// gives each output position's source offset so<j> (and, for several positions, whether it is inside: in<j>).
fn taps_{{SRC}}(base: u32, wbase: u32, h0: i32, w0: i32, acc_in: Acc) -> Acc {
  var acc = acc_in;
  for (var b = 0u; b < p.kh; b++) {
    let hx = h0 + i32(b * p.dh);
    if (hx < 0 || hx >= i32(p.h)) {
      continue;
    }
    let row = base + u32(hx) * p.{{SRC}}s_h;
    for (var k = 0u; k < p.kw; k++) {
      let wx = w0 + i32(k * p.dw);
      {{COLUMNS}}
      let wi = wbase + b * p.ws_h + k * p.ws_w;
      for (var c = 0u; c < p.cg; c++) {
        let cs = c * p.{{SRC}}s_c;
        {{LOADS}}
        let q = wi + c * p.ws_c;
        {{ACC_FMA}}
      }
    }
  }
  return acc;
}

//// packed
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
  let c0 = (oc / p.og) * p.cg;
  return window(
    p.x_off + n * p.xs_n + c0 * p.xs_c,
    p.p_off + n * p.ps_n + c0 * p.ps_c,
    p.w_off + oc * p.ws_o,
    i32(ot * p.st) - p.pt,
    i32(oh * p.sh) - p.ph,
    i32(ow * p.sw) - p.pw,
    {{BIAS}},
  );
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let w = linear_index(gid, nwg, {{WG}}u);
  let first = w * {{LANES}}u;
  if (first >= p.work) {
    return;
  }
  var word = 0u;
  for (var l = 0u; l < {{LANES}}u; l++) {
    let e = first + l;
    if (e < p.work) {
      word |= encode_out(element(e)) << (l * {{BITS}}u);
    }
  }
  out[w] = word;
}

//// blocked
@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = linear_index(gid, nwg, {{WG}}u);
  if (i >= p.work) {
    return;
  }
  // Output columns fastest: neighbouring invocations share the channel block's weights and read adjacent x.
  var r = i;
  let owb = r % p.nwb;
  r /= p.nwb;
  let oh = r % p.ho;
  r /= p.ho;
  let ot = r % p.to;
  r /= p.to;
  let blk = r % p.nb;
  r /= p.nb;
  let grp = r % p.groups;
  let n = r / p.groups;
  let ow = min(owb * {{WB}}u, p.wo - {{WB}}u);
  let oc0 = grp * p.og + min(blk * {{OCB}}u, p.og - {{OCB}}u);
  let c0 = grp * p.cg;
  let acc = window(
    p.x_off + n * p.xs_n + c0 * p.xs_c,
    p.p_off + n * p.ps_n + c0 * p.ps_c,
    p.w_off + oc0 * p.ws_o,
    i32(ot * p.st) - p.pt,
    i32(oh * p.sh) - p.ph,
    i32(ow * p.sw) - p.pw,
    {{ACC_INIT}},
  );
  let plane = p.to * p.ho * p.wo;
  let o = (n * p.o + oc0) * plane + (ot * p.ho + oh) * p.wo + ow;
  {{ACC_STORE}}
}
