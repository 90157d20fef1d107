// Samples one token per row of logits, one workgroup per row, in a single dispatch, so the logits never leave
// the GPU: penalties and temperature into a scratch row, max, top-k and top-p thresholds by radix select over
// sortable float keys, min-p, then inverse-CDF sampling in index order with the uniform u drawn on the host.
// Probability masses are 64-bit fixed point (weight exp(x - max) scaled by 2^32): integer sums are exact, so the
// result does not depend on the order invocations add in.
// The header (params, bindings, load_logits, WG = 256, and reduce_max / reduce_sum64 from workgroup-reduce.wgsl)
// comes from the description in webgpu.ts; SAMPLING builds a row's parameters from the uniform (one row; u from the
// uniform or, in captured steps, the draw buffer) or from the row's words (a batch). `allowed(i)` is a grammar's
// token bitmask (ceil(V / 32) words per row, bit i % 32 of word i / 32 set: token i may be sampled), or always
// true without one: a masked token's logit becomes -Inf before anything else reads it, so every path below
// (greedy, top-k, top-p, min-p, the draw) sees only allowed tokens.

const NEG_INF_KEY = 0x007fffffu; // key of -Inf: every finite logit sorts above it

// Sampling parameters of one row: the uniform's (one row) or the row's words in `rows` (a batch, one workgroup per
// row: each sequence of a batched decode step with its own temperature, top-k/p, min-p, penalties and draw).
struct Sampling {
  v: u32,
  offset: u32,
  n_prev: u32,
  prev_at: u32,
  top_k: u32,
  inv_temperature: f32,
  top_p: f32,
  min_p: f32,
  u: f32,
  inv_repetition: f32,
  repetition: f32,
  presence: f32,
  frequency: f32,
}

var<workgroup> ws: Sampling;
var<private> wb: u32; // this row's start in the scratch rows
var<private> wm: u32; // this row's first mask word (when there is a mask)

var<workgroup> hist_lo: array<atomic<u32>, 256>;
var<workgroup> hist_hi: array<atomic<u32>, 256>;
var<workgroup> shared_key: u32;
var<workgroup> shared_rem: vec2<u32>;
var<workgroup> shared_pick: vec2<u32>; // (invocation, 0) owning the sampled element, with its remaining goal

// Order-preserving map of f32 bits to u32 (NaN is treated as -Inf by the caller).
fn sort_key(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let lo = a.x + b.x;
  return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}

fn sub64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x));
}

fn ge64(a: vec2<u32>, b: vec2<u32>) -> bool {
  return a.y > b.y || (a.y == b.y && a.x >= b.x);
}

// f * m for a fraction f in [0, 1] and a 64-bit m, to about 2^-24 relative: enough to place a threshold.
fn scale64(m: vec2<u32>, f: f32) -> vec2<u32> {
  let hi = f * f32(m.y);
  let hi_int = floor(hi);
  let lo = (hi - hi_int) * 4294967296.0 + f * f32(m.x);
  let carry = floor(lo / 4294967296.0);
  return vec2<u32>(u32(min(lo - carry * 4294967296.0, 4294967040.0)), u32(hi_int + carry));
}

fn weight(x: f32, row_max: f32) -> u32 {
  let w = select(exp(x - row_max), 0.0, x - row_max < -88.0 || is_nan(x));
  return u32(min(w * 4294967296.0, 4294967040.0));
}

// Radix select over 4 bytes of the key: the largest threshold key T among keys >= floor_key such that the
// elements with key >= T hold at least `goal` (a count when by_mass is false, a 64-bit mass otherwise).
fn radix_select(t: u32, floor_key: u32, goal: vec2<u32>, by_mass: bool, row_max: f32) -> u32 {
  var prefix = 0u;
  var rem = goal;
  for (var shift = 24i; shift >= 0; shift -= 8) {
    let high_mask = select(0u, 0xffffffffu << u32(shift + 8), shift < 24);
    atomicStore(&hist_lo[t], 0u);
    atomicStore(&hist_hi[t], 0u);
    workgroupBarrier();
    for (var i = t; i < ws.v; i += WG) {
      let x = work[wb + i];
      let key = sort_key(x);
      if (key >= floor_key && (key & high_mask) == prefix) {
        let bin = (key >> u32(shift)) & 0xffu;
        let add = select(1u, weight(x, row_max), by_mass);
        let old = atomicAdd(&hist_lo[bin], add);
        if (old + add < old) {
          atomicAdd(&hist_hi[bin], 1u);
        }
      }
    }
    workgroupBarrier();
    if (t == 0u) {
      var cum = vec2<u32>(0u, 0u);
      var digit = 0u;
      for (var b = 255i; b >= 0; b--) {
        let h = vec2<u32>(atomicLoad(&hist_lo[b]), atomicLoad(&hist_hi[b]));
        let next = add64(cum, h);
        if (ge64(next, rem) || b == 0) {
          digit = u32(b);
          rem = sub64(rem, cum);
          break;
        }
        cum = next;
      }
      shared_key = prefix | (digit << u32(shift));
      shared_rem = rem;
    }
    workgroupBarrier();
    prefix = shared_key;
    rem = shared_rem;
    workgroupBarrier();
  }
  return prefix;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let t = lid.x;
  // This workgroup's row and its sampling parameters, uniform across the workgroup (barriers depend on them).
  let row = wid.x;
  if (t == 0u) {
    ws = {{SAMPLING}};
  }
  let s = workgroupUniformLoad(&ws);
  wb = row * s.v;
  wm = row * ((s.v + 31u) / 32u);
  // 1. Penalised, tempered logits into the scratch row (NaN counts as -Inf: never sampled).
  let greedy = s.inv_temperature == 0.0;
  for (var i = t; i < s.v; i += WG) {
    let x = load_logits(s.offset + i);
    work[wb + i] = select(x * select(s.inv_temperature, 1.0, greedy), f32_bits(0xff800000u), is_nan(x) || !allowed(i));
  }
  storageBarrier();
  workgroupBarrier();
  // Each distinct previous token is penalised once, by its first occurrence in the list (HF semantics:
  // repetition divides positive logits and multiplies negative ones; presence and frequency subtract).
  if (s.n_prev > 0u) {
    for (var j = t; j < s.n_prev; j += WG) {
      let id = prev[s.prev_at + j];
      var first = true;
      var count = 0.0;
      for (var q = 0u; q < s.n_prev; q++) {
        if (prev[s.prev_at + q] == id) {
          first = first && q >= j;
          count += 1.0;
        }
      }
      if (first && id >= 0 && u32(id) < s.v && allowed(u32(id))) {
        // Penalties apply to the raw logit; temperature after (the order of HF's logits processors).
        let raw = load_logits(s.offset + u32(id));
        var x = select(raw * s.repetition, raw * s.inv_repetition, raw > 0.0);
        x = x - s.presence - s.frequency * count;
        work[wb + u32(id)] = select(x * select(s.inv_temperature, 1.0, greedy), f32_bits(0xff800000u), is_nan(raw));
      }
    }
    storageBarrier();
    workgroupBarrier();
  }
  // 2. Row max (and, greedy or top-1, its first index).
  var local_max = f32_bits(0xff800000u);
  for (var i = t; i < s.v; i += WG) {
    local_max = max(local_max, work[wb + i]);
  }
  let row_max = reduce_max(t, local_max);
  if (row_max == f32_bits(0xff800000u)) {
    if (t == 0u) {
      token[row] = -1; // every logit is -Inf or NaN: the host reports it
    }
    return;
  }
  if (greedy || s.top_k == 1u) {
    var first = 0xffffffffu;
    for (var i = t; i < s.v; i += WG) {
      if (work[wb + i] == row_max) {
        first = min(first, i);
      }
    }
    let f = -reduce_max(t, -f32(first)); // indices < 2^24: exact in f32
    if (t == 0u) {
      token[row] = i32(f);
    }
    return;
  }
  // 3. Thresholds: top-k by count, then top-p by mass among what top-k kept.
  var floor_key = NEG_INF_KEY + 1u;
  if (s.top_k > 0u && s.top_k < s.v) {
    floor_key = radix_select(t, floor_key, vec2<u32>(s.top_k, 0u), false, row_max);
  }
  if (s.top_p < 1.0) {
    var mass = vec2<u32>(0u, 0u);
    for (var i = t; i < s.v; i += WG) {
      if (sort_key(work[wb + i]) >= floor_key) {
        mass = add64(mass, vec2<u32>(weight(work[wb + i], row_max), 0u));
      }
    }
    let kept = reduce_sum64(t, mass);
    let scaled = scale64(kept, s.top_p);
    let goal = select(scaled, vec2<u32>(1u, 0u), scaled.x == 0u && scaled.y == 0u);
    floor_key = max(floor_key, radix_select(t, floor_key, goal, true, row_max));
  }
  // 4. Inverse CDF in index order over what is kept (min-p: weight >= min_p of the max's).
  let chunk = (s.v + WG - 1u) / WG;
  let begin = min(t * chunk, s.v);
  let end = min(begin + chunk, s.v);
  let min_w = u32(min(s.min_p * 4294967296.0, 4294967040.0));
  var part = vec2<u32>(0u, 0u);
  for (var i = begin; i < end; i++) {
    let w = weight(work[wb + i], row_max);
    if (sort_key(work[wb + i]) >= floor_key && w >= min_w) {
      part = add64(part, vec2<u32>(w, 0u));
    }
  }
  // The parts in index order, in reduce_sum64's scratch (free again: its result was read uniformly).
  reduce_sum64_scratch[t] = part;
  workgroupBarrier();
  if (t == 0u) {
    var total = vec2<u32>(0u, 0u);
    for (var q = 0u; q < WG; q++) {
      total = add64(total, reduce_sum64_scratch[q]);
    }
    var goal = scale64(total, s.u);
    if (ge64(goal, total)) {
      goal = sub64(total, vec2<u32>(1u, 0u));
    }
    var cum = vec2<u32>(0u, 0u);
    var owner = WG - 1u;
    for (var q = 0u; q < WG; q++) {
      let next = add64(cum, reduce_sum64_scratch[q]);
      if (!ge64(goal, next)) {
        owner = q;
        break;
      }
      cum = next;
    }
    shared_pick = vec2<u32>(owner, 0u);
    shared_rem = sub64(goal, cum);
  }
  workgroupBarrier();
  if (t == shared_pick.x) {
    var cum = vec2<u32>(0u, 0u);
    var last_kept = begin;
    for (var i = begin; i < end; i++) {
      let w = weight(work[wb + i], row_max);
      if (sort_key(work[wb + i]) >= floor_key && w >= min_w) {
        last_kept = i;
        cum = add64(cum, vec2<u32>(w, 0u));
        if (!ge64(shared_rem, cum)) {
          break;
        }
      }
    }
    token[row] = i32(last_kept);
  }
}
