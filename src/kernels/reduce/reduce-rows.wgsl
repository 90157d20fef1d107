// Reduction of the middle dim of a contiguous [outer, size, inner] input for short reduced dims (size <= 64, or
// longer with many outputs): output element o folds its row serially, so one invocation per output word folds its
// lanes' rows instead of a workgroup per output word idling most of its invocations. Argmax/argmin keep the first
// index of the extreme, and a NaN counts as the extreme (torch semantics). C is the input's compute type, R the
// result's; the header and the one-word-per-invocation loop come from the description in webgpu.ts.

// Combines (v, i) into the running (a, ai); returns the winner.
fn combine(a: C, ai: u32, v: C, vi: u32) -> vec2<u32> {
{{COMBINE}}
}

fn reduce_at(o: u32) -> R {
  let base = p.offset + (o / p.inner) * p.size * p.inner + o % p.inner;
  var a: C = {{INIT}};
  var ai = 0xffffffffu;
  for (var j = 0u; j < p.size; j++) {
    let r = combine(a, ai, load_x(base + j * p.inner), j);
    a = bitcast<C>(r.x);
    ai = r.y;
  }
  let acc_v = a;
  let acc_i = ai;
  return {{RESULT}};
}
