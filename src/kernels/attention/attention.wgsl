// Scaled dot-product attention, q [Sq, Hq, D] against k, v [Skv, Hkv, D] (strided views: a KV cache is usually a
// prefix of a bigger buffer), grouped-query heads, optional causal mask, float32 inside.
//
// One workgroup of WG invocations per (key split, query block, kv head, head block). Its rows are gq consecutive
// queries times gh query heads that share the kv head (ROWS >= gq * gh), so every K and V row it loads serves all
// of them (decode with GQA: all heads of a group; prefill: neighbouring queries too). Keys stream in tiles of WG:
//   1. invocation t scores key tile + t against every row (q rows sit in workgroup memory);
//   2. invocation r < ROWS takes row r's tile max and merges it into the running max (online softmax);
//   3. invocation t turns its key's scores into exp(s - max);
//   4. every invocation rescales and accumulates p * v for its own output dims, LANES consecutive dims per round
//      (so packed 16-bit outputs are written as whole words).
// Softmax rules (as the CPU reference): a NaN or +Inf score makes the row NaN, a row whose visible scores are all
// -Inf is NaN, a row that sees no key is 0. With key splits (p.splits > 1, the launcher's SPLIT_FINISH) the workgroup
// covers keys [split * chunk, +chunk) and writes its un-normalized state (max, sum, acc) for attention-merge.wgsl
// instead of the output.
// The header (params, bindings, load_q/k/v, encode_out, WG = 64, the ROWS, LANES, BITS, ROUNDS, Q_FLOATS
// constants, gated(): the output gate's sigmoid factor, applied by SINGLE_FINISH, and k_scale / v_scale: an FP8
// cache row's power-of-two scale, core/kv-fp8.ts, else 1, exact either way) comes from the description in
// attention.ts; FINISH, VISIBLE (keys query i sees), CACHE_ROW (key j's row: j, or through a paged cache's page
// table) and TABLE_AT (paged: where the query's table starts) are the launcher's code.

// ROWS: rows held per workgroup (p.gh * p.gq of them are used; a power of two so few pipelines serve all shapes).
// ROUNDS: output dims per row per invocation, up to ROUNDS rounds of LANES consecutive dims (ROUNDS * WG * LANES >= D).
// Q_FLOATS: q rows in workgroup memory, p.gh * p.gq * p.d <= Q_FLOATS (the launcher picks gh, gq so).
const RL = ROUNDS * LANES;

var<workgroup> sh_q: array<f32, Q_FLOATS>;
var<workgroup> sh_s: array<f32, ROWS * WG>;
var<workgroup> sh_p: array<f32, ROWS * WG>;
var<workgroup> sh_m: array<f32, ROWS>;

{{CACHE_ROW}}

// How many keys query i sees.
{{VISIBLE}}

// The query of row r (p.sq, i.e. none, for rows past gh * gq) and its head.
fn row_query(qb: u32, r: u32) -> u32 {
  return select(p.sq, min(qb * p.gq + r / p.gh, p.sq), r < p.gh * p.gq);
}

fn row_head(kh: u32, hb: u32, r: u32) -> u32 {
  return kh * p.group + hb * p.gh + r % p.gh;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let wg_index = wid.x + wid.y * nwg.x;
  if (wg_index >= p.total_wg) {
    return;
  }
  let t = lid.x;
  let split = wg_index % p.splits;
  let rest = wg_index / p.splits;
  let hb = rest % p.hblocks;
  let kh = (rest / p.hblocks) % p.hkv;
  let qb = rest / (p.hblocks * p.hkv);
{{TABLE_AT}}
  let key_begin = split * p.chunk;
  let chunk_end = min(key_begin + p.chunk, p.skv);

  // Row r (query row_query, head row_head) reads keys [key_begin, row_end[r]).
  var row_end: array<u32, ROWS>;
  var key_end = key_begin;
  for (var r = 0u; r < ROWS; r++) {
    let i = row_query(qb, r);
    var e = key_begin;
    if (i < p.sq) {
      e = max(key_begin, min(chunk_end, visible(i)));
    }
    row_end[r] = e;
    key_end = max(key_end, e);
  }

  for (var e = t; e < ROWS * p.d; e += WG) {
    let r = e / p.d;
    let i = row_query(qb, r);
    var x = 0.0;
    if (i < p.sq) {
      x = load_q(p.q_off + i * p.qs0 + row_head(kh, hb, r) * p.qs1 + (e % p.d) * p.qs2);
    }
    sh_q[e] = x;
  }
  workgroupBarrier();

  var m: array<f32, ROWS>;
  var l: array<f32, ROWS>;
  var bad: array<bool, ROWS>;
  var acc: array<f32, ROWS * RL>;
  for (var r = 0u; r < ROWS; r++) {
    m[r] = f32_bits(0xff800000u);
  }

  for (var tile = key_begin; tile < key_end; tile += WG) {
    let j = tile + t;
    // Zeroed explicitly: a loop-local var is not re-initialized per iteration by every compiler.
    var dot: array<f32, ROWS>;
    for (var r = 0u; r < ROWS; r++) {
      dot[r] = 0.0;
    }
    if (j < key_end) {
      let k_row = p.k_off + cache_row(j) * p.ks0 + kh * p.ks1;
      for (var c = 0u; c < p.d; c++) {
        let kc = load_k(k_row + c * p.ks2);
        for (var r = 0u; r < ROWS; r++) {
          dot[r] += sh_q[r * p.d + c] * kc;
        }
      }
      let ks = k_scale(k_row);
      for (var r = 0u; r < ROWS; r++) {
        dot[r] *= ks;
      }
    }
    for (var r = 0u; r < ROWS; r++) {
      sh_s[r * WG + t] = p.scale * dot[r];
    }
    workgroupBarrier();

    if (t < ROWS) {
      let n = select(0u, min(WG, row_end[t] - tile), row_end[t] > tile);
      var mx = m[t];
      var poison = false;
      for (var jj = 0u; jj < n; jj++) {
        let s = sh_s[t * WG + jj];
        poison = poison || is_nan(s) || s == f32_bits(0x7f800000u);
        if (!is_nan(s)) {
          mx = max(mx, s);
        }
      }
      sh_m[t] = select(mx, f32_bits(0x7fc00000u), poison);
    }
    workgroupBarrier();

    for (var r = 0u; r < ROWS; r++) {
      let mn = sh_m[r];
      var pr = 0.0;
      if (j < row_end[r] && !is_nan(mn) && mn != f32_bits(0xff800000u)) {
        pr = exp_nonpos(sh_s[r * WG + t] - mn);
      }
      sh_p[r * WG + t] = pr;
    }
    workgroupBarrier();

    for (var r = 0u; r < ROWS; r++) {
      let mn = sh_m[r];
      if (is_nan(mn)) {
        bad[r] = true;
      } else {
        let corr = select(exp_nonpos(m[r] - mn), 1.0, mn == f32_bits(0xff800000u));
        l[r] *= corr;
        for (var a = 0u; a < RL; a++) {
          acc[r * RL + a] *= corr;
        }
        m[r] = mn;
      }
    }
    let n_tile = min(WG, key_end - tile);
    for (var jj = 0u; jj < n_tile; jj++) {
      let key = tile + jj;
      var pj: array<f32, ROWS>;
      for (var r = 0u; r < ROWS; r++) {
        pj[r] = sh_p[r * WG + jj];
        l[r] += pj[r];
      }
      let v_row = p.v_off + cache_row(key) * p.vs0 + kh * p.vs1;
      let vs = v_scale(v_row);
      for (var a = 0u; a < RL; a++) {
        let c = ((a / LANES) * WG + t) * LANES + a % LANES;
        if (c < p.d) {
          let vc = load_v(v_row + c * p.vs2) * vs;
          for (var r = 0u; r < ROWS; r++) {
            // Keys a row does not see add nothing, even where v is NaN or Inf (0 * Inf would be NaN).
            acc[r * RL + a] += select(0.0, pj[r] * vc, key < row_end[r]);
          }
        }
      }
    }
  }

{{FINISH}}
}
