// Direct convolution (see conv.wgsl), blocked: OCB output channels of one group at WB adjacent output columns per
// invocation (Acc: a struct of vec4 accumulators), so each x value loaded serves OCB fmas and each weight WB; float32
// output only. A group's last channel block starts at og - OCB and a row's last column block at wo - WB
// (overlapping the block before when they do not divide): the overlap is computed twice and written twice with the
// same bits, and the inner loop needs no channel or column bounds check. A column outside x (padding) loads a
// clamped position and selects 0 instead. The header (Acc, the windows, OCB, WB) comes from the description in
// webgpu.ts.

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = linear_index(gid, nwg, WG);
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
  let ow = min(owb * WB, p.wo - WB);
  let oc0 = grp * p.og + min(blk * OCB, p.og - OCB);
  let c0 = grp * p.cg;
  let wbase = p.w_off + oc0 * p.ws_o;
  let t0 = i32(ot * p.st) - p.pt;
  let h0 = i32(oh * p.sh) - p.ph;
  let w0 = i32(ow * p.sw) - p.pw;
  var acc = window_p(p.p_off + n * p.ps_n + c0 * p.ps_c, wbase, t0 + i32(p.np), p.np, h0, w0, {{ACC_INIT}});
  acc = window_x(p.x_off + n * p.xs_n + c0 * p.xs_c, wbase, t0, p.t, h0, w0, acc);
  let plane = p.to * p.ho * p.wo;
  let o = (n * p.o + oc0) * plane + (ot * p.ho + oh) * p.wo + ow;
  {{ACC_STORE}}
}
