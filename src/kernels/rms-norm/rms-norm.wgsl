// RMSNorm of rows of a contiguous [rows, d] input (HF Qwen3RMSNorm): n = round_x(x / sqrt(mean(x^2) + eps)) with
// the normalized value rounded to x's dtype, out = weight * n, float32 inside. Two entry points:
//   row_main: one invocation per row (short rows in bulk, e.g. per-head q/k norms of a prefill);
//   workgroup_main: one workgroup of WG per row, the sum of squares reduced in workgroup memory.
// Packed outputs are written a word at a time; the launcher only picks a packed output when every row is whole
// words (d a multiple of lanes), else it computes float32 and casts.
// The header (params, bindings, load_x/load_w/encode_out, WG, ROW_WG, LANES, BITS, row_sum from
// workgroup-reduce.wgsl) comes from the description in webgpu.ts; APPLY_WEIGHT is its code (the rounding, times the
// weight when there is one).

// 1 / sqrt(mean + eps) with NaN kept (sqrt's result outside its domain is driver-defined).
fn inv_rms(sum_sq: f32) -> f32 {
  let ms = sum_sq / f32(p.d) + p.eps;
  return select(1.0 / sqrt(ms), ms, is_nan(ms));
}

fn normalized(x: f32, r: f32, c: u32) -> f32 {
  return {{APPLY_WEIGHT}};
}

// Writes words start, start + step, ... of the row at element `base` of the input (`first` in the output).
fn store_row(base: u32, first: u32, r: f32, start: u32, step: u32) {
  for (var j = start * LANES; j < p.d; j += step * LANES) {
    var word = 0u;
    for (var l = 0u; l < LANES; l++) {
      word |= encode_out(normalized(load_x(base + j + l), r, j + l)) << (l * BITS);
    }
    out[(first + j) / LANES] = word;
  }
}

@compute @workgroup_size(ROW_WG)
fn row_main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let row = linear_index(gid, nwg, ROW_WG);
  if (row >= p.rows) {
    return;
  }
  let base = p.x_off + row * p.d;
  var sum_sq = 0.0;
  for (var j = 0u; j < p.d; j++) {
    let x = load_x(base + j);
    sum_sq += x * x;
  }
  store_row(base, row * p.d, inv_rms(sum_sq), 0u, 1u);
}

@compute @workgroup_size(WG)
fn workgroup_main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) {
    return;
  }
  let t = lid.x;
  let base = p.x_off + row * p.d;
  var sum_sq = 0.0;
  for (var j = t; j < p.d; j += WG) {
    let x = load_x(base + j);
    sum_sq += x * x;
  }
  let r = inv_rms(row_sum(t, sum_sq));
  store_row(base, row * p.d, r, t, WG);
}
