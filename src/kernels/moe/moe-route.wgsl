// MoE router: per row of logits [T, E], a float32 score per expert (softmax over the row, or an elementwise sigmoid)
// and the topK experts by score + selection bias (descending, ties to the lower id), weighted by their unbiased
// scores, divided by (their sum + eps) when normalize, times scale. One 64-invocation workgroup per row. The top k are found in k
// rounds without storing the row: round r takes the best (probability, id) that orders after round r-1's winner,
// every probability recomputed the same way each round (so equal values stay equal and any E fits).
// With the router fused (moeRouter), the workgroup first computes its token's E logits (one expert row per
// invocation, float32, in index order along h) into workgroup memory: router GEMV and top-k in one dispatch.
// A row with a NaN logit (or, for softmax, a +Inf logit or only -Inf logits) has no scores: ids 0..k-1 with NaN
// weights, as the CPU.
// With p.shared_gate = 1 the row has E+1 logits, the last a shared expert's gate: everything above sees the first
// E (p.e), and the row's outputs (stride top_k + 1) end with slot top_k = (id E, sigmoid(gate logit)), neither
// normalized nor scaled, written even in a row without scores (NaN only when the gate logit is NaN).
// Ranking uses this kernel's float32 probabilities (exp and division a few ulps from the CPU's correctly rounded
// ones), so two experts whose probabilities are within an ulp or two, or that underflow to subnormals (which a GPU
// may flush to 0), can come out in the other order than on the CPU; exactly equal logits always tie identically.
// The header (params, bindings, load_x/load_router_w, WG = 64, logit() and bias(), and the workgroup reductions
// reduce_row_max / reduce_sum / reduce_pick from workgroup-reduce.wgsl) comes from the description in moe-route.ts;
// LOGITS_PROLOGUE is the fused router's GEMV.

// The max of the non-NaN logits, and whether any is NaN.
struct RowMax {
  m: f32,
  nan: u32,
}

// A top-k candidate: its key (probability + bias) and expert id.
struct Pick {
  key: f32,
  id: u32,
}

fn is_neg_inf(x: f32) -> bool {
  return bitcast<u32>(x) == 0xff800000u;
}

// The expert's score, the weight it gets when chosen.
fn score(base: u32, i: u32, row_max: f32, row_sum: f32) -> f32 {
  let x = logit(base, i);
  if (p.sigmoid != 0u) {
    return 1.0 / (1.0 + exp(-x));
  }
  return select(exp(x - row_max) / row_sum, 0.0, is_neg_inf(x));
}

// The shared expert's weight: sigmoid, NaN kept explicitly (exp of NaN is the driver's choice).
fn gate_sigmoid(x: f32) -> f32 {
  return select(1.0 / (1.0 + exp(-x)), x, is_nan(x));
}

// (pa, ia) comes first in the top-k order: larger probability, then lower id.
fn before(pa: f32, ia: u32, pb: f32, ib: u32) -> bool {
  return pa > pb || (pa == pb && ia < ib);
}

// Of two candidates, the one that comes first (a unless b comes before it).
fn first_pick(a: Pick, b: Pick) -> Pick {
  if (before(b.key, b.id, a.key, a.id)) {
    return b;
  }
  return a;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let row = wid.x + wid.y * nwg.x;
  // Workgroups past the last row (a folded grid) still take part in every barrier.
  let live = row < p.rows;
  let base = p.off + row * p.s_row;
{{LOGITS_PROLOGUE}}

  var m = f32_bits(0xff800000u);
  var nan = 0u;
  if (live) {
    for (var i = lid.x; i < p.e; i += WG) {
      let x = logit(base, i);
      if (is_nan(x)) {
        nan = 1u;
      } else {
        m = max(m, x);
      }
    }
  }
  let mx = reduce_row_max(lid.x, RowMax(m, nan));
  let row_max = mx.m;
  let bad = mx.nan != 0u || (p.sigmoid == 0u && (bitcast<u32>(row_max) & 0x7fffffffu) == 0x7f800000u);

  var sum = 0.0;
  // Sigmoid scores need no row sum (the max pass above still finds NaN rows).
  if (live && !bad && p.sigmoid == 0u) {
    for (var i = lid.x; i < p.e; i += WG) {
      let x = logit(base, i);
      sum += select(exp(x - row_max), 0.0, is_neg_inf(x));
    }
  }
  let row_sum = reduce_sum(lid.x, sum);

  let inf = f32_bits(0x7f800000u);
  var prev_p = inf;  // above every key: round 0 may take anything
  var prev_id = 0u;
  var total = 0.0;
  let out0 = row * (p.top_k + p.shared_gate);
  for (var r = 0u; r < p.top_k; r++) {
    var best_p = -inf;
    var best_id = 0xffffffffu;
    if (live && !bad) {
      for (var i = lid.x; i < p.e; i += WG) {
        let q = score(base, i, row_max, row_sum) + bias(i);
        let after = q < prev_p || (q == prev_p && i > prev_id);
        if (after && before(q, i, best_p, best_id)) {
          best_p = q;
          best_id = i;
        }
      }
    }
    let best = reduce_pick(lid.x, Pick(best_p, best_id));
    prev_p = best.key;
    prev_id = best.id;
    if (live && lid.x == 0u) {
      if (bad) {
        ids[out0 + r] = r;
        weights[out0 + r] = f32_bits(0x7fc00000u);
      } else {
        let w = score(base, prev_id, row_max, row_sum);
        ids[out0 + r] = prev_id;
        weights[out0 + r] = w;
        total += w;
      }
    }
  }
  if (live && lid.x == 0u && !bad && (p.normalize != 0u || p.scale != 1.0)) {
    let denominator = select(1.0, total + p.eps, p.normalize != 0u);
    for (var r = 0u; r < p.top_k; r++) {
      weights[out0 + r] = weights[out0 + r] / denominator * p.scale;
    }
  }
  if (live && lid.x == 0u && p.shared_gate != 0u) {
    ids[out0 + p.top_k] = p.e;
    weights[out0 + p.top_k] = gate_sigmoid(logit(base, p.e));
  }
}
