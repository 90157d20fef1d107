// Attention backward, second pass: one workgroup of WG invocations per (key row j, kv head kh), over the rows
// (query i, query head h of kh's group) that see key j (causal: i >= j - query_offset), in workgroup-strided tiles.
// Per tile, invocation t recomputes P_ij = exp(scale q_i.k_j - L_i) and ds_ij = P_ij (dO_i.v_j - D_i) from the first
// pass's L and D (attention-backward-dq.wgsl) into workgroup memory; then every invocation adds, for its own dims,
// ds_ij q_i into dk_j and P_ij dO_i into dv_j, in row order: no atomics, the same bits on every run.
// The header (params, bindings, load_q/k/v/g, WG and the ROUNDS, DQ constants) comes from webgpu.ts.

var<workgroup> sh_k: array<f32, DQ>;
var<workgroup> sh_v: array<f32, DQ>;
var<workgroup> sh_p: array<f32, WG>;
var<workgroup> sh_ds: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let wg_index = wid.x + wid.y * nwg.x;
  if (wg_index >= p.total_wg) {
    return;
  }
  let t = lid.x;
  let j = wg_index / p.hkv;
  let kh = wg_index % p.hkv;
  for (var c = t; c < p.d; c += WG) {
    sh_k[c] = load_k(p.k_off + j * p.ks0 + kh * p.ks1 + c * p.ks2);
    sh_v[c] = load_v(p.v_off + j * p.vs0 + kh * p.vs1 + c * p.vs2);
  }
  workgroupBarrier();

  var first = 0u;
  if (p.causal != 0u) {
    first = u32(clamp(i32(j) - p.query_offset, 0, i32(p.sq)));
  }
  let rows = (p.sq - first) * p.group;

  var acc_k: array<f32, ROUNDS>;
  var acc_v: array<f32, ROUNDS>;
  for (var r = 0u; r < ROUNDS; r++) {
    acc_k[r] = 0.0;
    acc_v[r] = 0.0;
  }
  for (var tile = 0u; tile < rows; tile += WG) {
    let row = tile + t;
    var pr = 0.0;
    var ds = 0.0;
    if (row < rows) {
      let i = first + row / p.group;
      let h = kh * p.group + row % p.group;
      let q_row = p.q_off + i * p.qs0 + h * p.qs1;
      let g_row = p.g_off + i * p.gs0 + h * p.gs1;
      var s = 0.0;
      var dp = 0.0;
      for (var c = 0u; c < p.d; c++) {
        s += load_q(q_row + c * p.qs2) * sh_k[c];
        dp += load_g(g_row + c * p.gs2) * sh_v[c];
      }
      let lse_i = lse[h * p.sq + i];
      pr = select(exp_nonpos(p.scale * s - lse_i), f32_bits(0x7fc00000u), is_nan(lse_i));
      ds = pr * (dp - delta[h * p.sq + i]);
    }
    sh_p[t] = pr;
    sh_ds[t] = ds;
    workgroupBarrier();
    let count = min(WG, rows - tile);
    for (var rr = 0u; rr < count; rr++) {
      let row2 = tile + rr;
      let i = first + row2 / p.group;
      let h = kh * p.group + row2 % p.group;
      let q_row = p.q_off + i * p.qs0 + h * p.qs1;
      let g_row = p.g_off + i * p.gs0 + h * p.gs1;
      let pj = sh_p[rr];
      let dsj = sh_ds[rr];
      for (var r = 0u; r < ROUNDS; r++) {
        let c = r * WG + t;
        if (c < p.d) {
          acc_k[r] += dsj * load_q(q_row + c * p.qs2);
          acc_v[r] += pj * load_g(g_row + c * p.gs2);
        }
      }
    }
    workgroupBarrier();
  }
  let out_base = (j * p.hkv + kh) * p.d;
  for (var r = 0u; r < ROUNDS; r++) {
    let c = r * WG + t;
    if (c < p.d) {
      dk[out_base + c] = p.scale * acc_k[r];
      dv[out_base + c] = acc_v[r];
    }
  }
}
