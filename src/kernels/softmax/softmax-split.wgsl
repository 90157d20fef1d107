// Split-row softmax for a few long rows (one workgroup per row would leave most of a GPU idle): each row is cut
// into `chunks` pieces. Pass `partials`: one workgroup per piece writes its online (max, sum). Pass `normalize`: one
// workgroup per piece merges its row's partials and writes the piece's outputs. Rows are contiguous (inner 1).
// The header (p.chunk_len is a multiple of LANES, so pieces start on whole output words) comes from the description
// in softmax.ts.

@compute @workgroup_size(WG)
fn partials_main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let piece = wid.x + wid.y * nwg.x;
  if (piece >= p.rows * p.chunks) {
    return;
  }
  let row = piece / p.chunks;
  let begin = (piece % p.chunks) * p.chunk_len;
  let end = min(begin + p.chunk_len, p.d);
  var m = f32_bits(0xff800000u);
  var s = 0.0;
  for (var j = begin + lid.x; j < end; j += WG) {
    let r = merge(m, s, load_x(p.offset + row * p.d + j), 1.0);
    m = r.x;
    s = r.y;
  }
  let total = reduce_state(lid.x, m, s);
  if (lid.x == 0u) {
    out[2u * piece] = bitcast<u32>(total.x);
    out[2u * piece + 1u] = bitcast<u32>(total.y);
  }
}

@compute @workgroup_size(WG)
fn normalize_main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let piece = wid.x + wid.y * nwg.x;
  if (piece >= p.rows * p.chunks) {
    return;
  }
  let t = lid.x;
  let row = piece / p.chunks;
  var state = vec2<f32>(f32_bits(0xff800000u), 0.0);
  if (t < p.chunks) {
    let at = 2u * (row * p.chunks + t);
    state = vec2<f32>(partials[at], partials[at + 1u]);
  }
  let total = reduce_state(t, state.x, state.y);
  let row_max = total.x;
  let row_sum = row_sum_or_nan(total);
  let inv = 1.0 / row_sum;
  let log_sum = log(row_sum);
  let base = p.offset + row * p.d;
  let first = row * p.d;
  let begin = (piece % p.chunks) * p.chunk_len;
  let end = min(begin + p.chunk_len, p.d);
  for (var j = begin + t * LANES; j < end; j += WG * LANES) {
{{STORE}}
  }
}
