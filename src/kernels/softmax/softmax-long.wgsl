// Softmax / log-softmax of contiguous rows (inner 1) longer than 64, four elements at a time. A row is cut into
// p.chunks pieces of p.chunk_len elements (a multiple of 4 and of LANES, so pieces start on whole output words):
// - chunks == 1, entry `main`: one workgroup per row, in one dispatch: each invocation keeps a running state
//   (max m, sum s of exp(x - m)) over its quads, the workgroup merges them, then writes exp(x - max) / sum.
// - chunks > 1, entries `partials_main` then `normalize_main`: one workgroup per piece writes the piece's state, then
//   one workgroup per piece merges its row's states and writes the piece (two dispatches; the whole GPU works on a
//   row). partials_main writes the states through `out` (PSTRIDE words a piece) and binds x in place of `partials`.
// The running state costs one exp per element: a quad rescales s only when its max passes m (rarely, after the first
// quads), where a per-element merge of states would take two exps and a branch per element. m starts at -FLT_MAX,
// not -Inf, so exp(x - m) of a -Inf entry is 0, never exp(NaN). NaN and +Inf entries are flagged on the side (a row
// with either is NaN, as in torch: exp(inf - inf)); a row of only -Inf ends with s == 0 and is NaN too.
// A +Inf entry always ends as m: a quad's max passes any finite m (a NaN in the same quad may hide it, but the NaN
// is flagged itself).
// load4/store4 (the quad at element e: one vec4 load or store where the launcher could bind vec4s, else four
// scalar ones), out_value/out_value4 (softmax or log-softmax of one value) and the workgroup merge reduce_state come
// from the description in webgpu.ts, with PSTRIDE.

const MIN_MAX = -3.4028234663852886e38;

const ABS = vec4<u32>(0x7fffffffu);

fn max4(v: vec4<f32>) -> f32 {
  return max(max(v.x, v.y), max(v.z, v.w));
}

// exp(d) for d <= 0, exactly 0 below -88 whatever the GPU's exp does there (NaN rows are flagged apart).
fn exp_below_max4(d: vec4<f32>) -> vec4<f32> {
  return select(exp(d), vec4<f32>(0.0), d < vec4<f32>(-88.0));
}

// The state (m, s) of elements [begin, end) of the row whose first input element is `base`, over invocation t's
// quads (two a step, WG quads apart, for two independent exps in flight); m is NaN when a NaN or +Inf was seen.
fn piece_state(base: u32, begin: u32, end: u32, t: u32) -> vec2<f32> {
  var m = MIN_MAX;
  var s = 0.0;
  // The largest |bits| seen: above 0x7f800000 means a NaN (a bit test: a GPU may fold float NaN tests away).
  var nan_bits = vec4<u32>(0u);
  let quads_end = begin + ((end - begin) & ~3u);
  var j = begin + 4u * t;
  for (; j + 4u * WG < quads_end; j += 8u * WG) {
    let v0 = load4(base + j);
    let v1 = load4(base + j + 4u * WG);
    nan_bits = max(nan_bits, max(bitcast<vec4<u32>>(v0) & ABS, bitcast<vec4<u32>>(v1) & ABS));
    let qm = max(max4(v0), max4(v1));
    if (qm > m) {
      s *= exp_below_max(m - qm);
      m = qm;
    }
    let e = exp_below_max4(v0 - m) + exp_below_max4(v1 - m);
    s += (e.x + e.y) + (e.z + e.w);
  }
  if (j < quads_end) {
    let v = load4(base + j);
    nan_bits = max(nan_bits, bitcast<vec4<u32>>(v) & ABS);
    let qm = max4(v);
    if (qm > m) {
      s *= exp_below_max(m - qm);
      m = qm;
    }
    let e = exp_below_max4(v - m);
    s += (e.x + e.y) + (e.z + e.w);
  }
  // The 1-3 elements past the last whole quad (rows whose length is not a multiple of 4).
  for (var k = quads_end + t; k < end; k += WG) {
    let v = load_x(base + k);
    nan_bits.x = max(nan_bits.x, bitcast<u32>(v) & 0x7fffffffu);
    if (v > m) {
      s *= exp_below_max(m - v);
      m = v;
    }
    s += exp_below_max(v - m);
  }
  // +Inf ends as m (exp(inf - inf) is NaN in torch: the row is NaN).
  let poisoned = any(nan_bits > vec4<u32>(0x7f800000u)) || bitcast<u32>(m) == 0x7f800000u;
  return vec2<f32>(select(m, f32_bits(0x7fc00000u), poisoned), s);
}

// Writes elements [begin, end) of `row` from the row's merged state.
fn write_piece(row: u32, begin: u32, end: u32, t: u32, total: vec2<f32>) {
  let row_max = total.x;
  // NaN for rows with a NaN or +Inf (m NaN) and rows of only -Inf (s == 0); every output is then that NaN.
  let row_sum = select(total.y, f32_bits(0x7fc00000u), is_nan(total.x) || total.y == 0.0);
  let nan_row = is_nan(row_sum);
  let inv = 1.0 / row_sum;
  let log_sum = log(row_sum);
  let base = p.offset + row * p.d;
  let first = row * p.d;
  let quads_end = begin + ((end - begin) & ~3u);
  var j = begin + 4u * t;
  for (; j + 4u * WG < quads_end; j += 8u * WG) {
    let r0 = out_value4(load4(base + j), row_max, inv, log_sum);
    let r1 = out_value4(load4(base + j + 4u * WG), row_max, inv, log_sum);
    store4(first + j, select(r0, vec4<f32>(row_sum), nan_row));
    store4(first + j + 4u * WG, select(r1, vec4<f32>(row_sum), nan_row));
  }
  if (j < quads_end) {
    let r = out_value4(load4(base + j), row_max, inv, log_sum);
    store4(first + j, select(r, vec4<f32>(row_sum), nan_row));
  }
  // The tail: whole output words (the launcher keeps packed rows even), one invocation a word.
  for (var j = quads_end + t * LANES; j < end; j += WG * LANES) {
    var word = 0u;
    for (var l = 0u; l < LANES; l++) {
      let r = out_value(load_x(base + j + l), row_max, inv, log_sum);
      word |= encode_out(select(r, row_sum, nan_row)) << (l * BITS);
    }
    store_word((first + j) / LANES, word);
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) {
    return;
  }
  let t = lid.x;
  let st = piece_state(p.offset + row * p.d, 0u, p.d, t);
  write_piece(row, 0u, p.d, t, reduce_state(t, st.x, st.y));
}

@compute @workgroup_size(WG)
fn partials_main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let piece = wid.x + wid.y * nwg.x;
  if (piece >= p.rows * p.chunks) {
    return;
  }
  let t = lid.x;
  let row = piece / p.chunks;
  let begin = (piece % p.chunks) * p.chunk_len;
  let st = piece_state(p.offset + row * p.d, begin, min(begin + p.chunk_len, p.d), t);
  let total = reduce_state(t, st.x, st.y);
  if (t == 0u) {
    store_word(PSTRIDE * piece, bitcast<u32>(total.x));
    store_word(PSTRIDE * piece + 1u, bitcast<u32>(total.y));
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
  // p.chunks <= WG: one state per invocation, merged by the same tree as a piece's.
  var state = vec2<f32>(MIN_MAX, 0.0);
  if (t < p.chunks) {
    let at = PSTRIDE * (row * p.chunks + t);
    state = vec2<f32>(partials[at], partials[at + 1u]);
  }
  let begin = (piece % p.chunks) * p.chunk_len;
  write_piece(row, begin, min(begin + p.chunk_len, p.d), t, reduce_state(t, state.x, state.y));
}
