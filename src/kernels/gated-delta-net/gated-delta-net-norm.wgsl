// Chunked Gated DeltaNet, pass 4 of 4: the gated RMSNorm w_j o_j / rms(o) silu(z_j) of one (token, value head) row
// of out, in place, as the recurrent kernel ends each token (row_sum: workgroup-reduce.wgsl's tree, summing).

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) {
    return;
  }
  let tid = lid.x;
  let t = row / p.hv;
  let h = row % p.hv;
  let base = p.out_off + row * p.dv;
  var ss = 0.0;
  for (var j = tid; j < p.dv; j += WG) {
    let o = out[base + j];
    ss += o * o;
  }
  let rn = inverseSqrt(row_sum(tid, ss) / f32(p.dv) + p.eps);
  for (var j = tid; j < p.dv; j += WG) {
    let zj = load_z(p.z_off + t * p.z_s0 + h * p.dv + j);
    out[base + j] = load_norm_w(p.nw_off + j) * out[base + j] * rn * silu(zj);
  }
}
