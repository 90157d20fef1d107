// Transposed 1-D convolution (see conv-transpose1d.wgsl), blocked: OCB output channels of one group at TB output
// positions of one phase per invocation (Acc: a struct of vec4 accumulators), float32 output only. Positions
// t = ph + m * stride of the same phase ph = t mod stride take the same taps j, and at tap j the TB positions
// m0 .. m0 + TB - 1 read the adjacent inputs q0 .. q0 + TB - 1, so each x value loaded serves OCB fmas and each
// weight TB. A group's last channel block starts at og - OCB (overlapping the block before when OCB does not divide
// og: the overlap is computed twice and written twice with the same bits); positions past the phase's end are
// computed on clamped inputs and not stored. An input outside x loads a clamped position and selects 0 instead.
// The header (Acc, OCB, TB) and the unrolled snippets come from the description in webgpu.ts.

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = linear_index(gid, nwg, WG);
  if (i >= p.work) {
    return;
  }
  // Position blocks fastest: neighbouring invocations share the phase's taps and the channel block's weights, and
  // read adjacent x. The phase comes next, so a SIMD group seldom mixes two tap sequences.
  var r = i;
  let mb = r % p.nmb;
  r /= p.nmb;
  let ph = r % p.nph;
  r /= p.nph;
  let blk = r % p.nb;
  r /= p.nb;
  let grp = r % p.groups;
  let n = r / p.groups;
  // Positions of phase ph: ph + m * stride for m < count.
  let count = (p.lout - ph + p.stride - 1u) / p.stride;
  let m0 = mb * TB;
  if (m0 >= count) {
    return;
  }
  let ocg = min(blk * OCB, p.og - OCB);
  let oc0 = grp * p.og + ocg;
  let c0 = grp * p.cg;
  let xbase = p.x_off + n * p.xs_n + c0 * p.xs_c;
  let wbase = p.w_off + c0 * p.ws_c + ocg * p.ws_o;
  let t0 = ph + m0 * p.stride;
  let shifted = i32(t0) + p.pad;
  var acc = {{ACC_INIT}};
  // The first tap whose position is a multiple of stride (WGSL's % truncates, which keeps the test right below 0).
  var j = 0u;
  while (j < p.jstep && (shifted - i32(j * p.dil)) % i32(p.stride) != 0) {
    j++;
  }
  if (j < p.jstep) {
    for (; j < p.k; j += p.jstep) {
      // Exact: the first position's shifted index is a multiple of stride at this tap.
      let q0 = (shifted - i32(j * p.dil)) / i32(p.stride);
      // Positions fall as j grows: once the block's last input is below 0 nothing further lands in x.
      if (q0 + i32(TB) - 1 < 0) {
        break;
      }
      if (q0 >= i32(p.l)) {
        continue;
      }
      // Each position's input offset xo<i> and whether it is inside x: in<i>.
      {{COLUMNS}}
      var wo = wbase + j * p.ws_k;
      var cs = 0u;
      for (var c = 0u; c < p.cg; c++) {
        {{LOADS}}
        {{ACC_FMA}}
        cs += p.xs_c;
        wo += p.ws_c;
      }
    }
  }
  let o = (n * p.o + oc0) * p.lout + t0;
  {{ACC_STORE}}
}
