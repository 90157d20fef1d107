// Transposed 1-D convolution (torch F.conv_transpose1d) as a gather, f32 accumulation, no atomics and no workgroup
// memory: element e of the contiguous output [N, O, Lout] sums x[n, c, q] * weight[c, o mod og, j] over the
// channels c of o's group and the taps j whose input position q = (t + padding - j*dilation) / stride is whole and
// inside x. A scatter (each input adding into k outputs) would need atomics, and float atomics do not exist in
// WGSL; the gather writes each output word once. Whole positions recur every jstep = stride / gcd(stride, dilation)
// taps, so after finding the first one the loop steps over the taps that could never land (2 of 3 at stride 3).
// x, weight and bias are read through their strides, so views need no copy. The header and the
// one-word-per-invocation loop come from the description in webgpu.ts.

fn conv_transpose1d_at(e: u32) -> f32 {
  let t = e % p.lout;
  let r = e / p.lout;
  let oc = r % p.o;
  let n = r / p.o;
  let c0 = (oc / p.og) * p.cg;
  let xbase = p.x_off + n * p.xs_n + c0 * p.xs_c;
  let wbase = p.w_off + c0 * p.ws_c + (oc % p.og) * p.ws_o;
  var acc = {{BIAS}};
  let shifted = i32(t) + p.pad;
  // The first tap whose position is a multiple of stride (WGSL's % truncates, which keeps the test right below 0).
  var j = 0u;
  while (j < p.jstep && (shifted - i32(j * p.dil)) % i32(p.stride) != 0) {
    j++;
  }
  if (j == p.jstep) {
    return acc;
  }
  for (; j < p.k; j += p.jstep) {
    let s = shifted - i32(j * p.dil);
    // Positions fall as j grows: nothing further lands in x.
    if (s < 0) {
      break;
    }
    let q = u32(s) / p.stride;
    if (q >= p.l) {
      continue;
    }
    var xo = xbase + q * p.xs_l;
    var wo = wbase + j * p.ws_k;
    for (var c = 0u; c < p.cg; c++) {
      acc = fma(load_x(xo), load_weight(wo), acc);
      xo += p.xs_c;
      wo += p.ws_c;
    }
  }
  return acc;
}
