// Inclusive prefix sum (cumsum) along the middle dim of a logical [outer, size, inner] input, one row (o, i) at a
// time; `reverse` scans from the end (cumsum's backward). Floats accumulate in f32, integers in wrapping i32 (C is
// the accumulator type). The input is read through src_at (its strides, or contiguous past an offset); the output
// is contiguous [outer, size, inner] in C. The header comes from the description in webgpu.ts.
//
// main: one workgroup per row. The row is cut into chunks of WG * PER elements; each invocation sums PER
// consecutive elements of the chunk, a Hillis-Steele scan over the WG partial sums gives each its exclusive prefix,
// and `carry` (the total of the chunks before) is added: rows of any length, with WG partial sums in memory.
// rows_main: one invocation per row, a serial scan (short rows, where a workgroup would idle in barriers).

var<workgroup> partial: array<C, WG>;
var<workgroup> chunk_total: C;

// Storage offset of element j of row `row`.
fn row_element(row: u32, j: u32) -> u32 {
  let o = row / p.inner;
  let i = row % p.inner;
  let jj = select(j, p.size - 1u - j, p.reverse != 0u);
  return (o * p.size + jj) * p.inner + i;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let row = wid.x + wid.y * nwg.x;
  // Workgroup-uniform: the whole workgroup returns or none of it.
  if (row >= p.rows) {
    return;
  }
  let t = lid.x;
  var carry: C = C(0);
  for (var start = 0u; start < p.size; start += WG * PER) {
    let first = start + t * PER;
    var vals: array<C, PER>;
    var local_sum: C = C(0);
    for (var k = 0u; k < PER; k++) {
      let j = first + k;
      vals[k] = C(0);
      if (j < p.size) {
        vals[k] = load_x(src_at(row_element(row, j)));
      }
      local_sum += vals[k];
    }
    partial[t] = local_sum;
    workgroupBarrier();
    // Inclusive Hillis-Steele scan over the partial sums: read, barrier, write, barrier.
    for (var s = 1u; s < WG; s <<= 1u) {
      var v: C = partial[t];
      if (t >= s) {
        v += partial[t - s];
      }
      workgroupBarrier();
      partial[t] = v;
      workgroupBarrier();
    }
    var run: C = carry;
    if (t > 0u) {
      run += partial[t - 1u];
    }
    if (t == WG - 1u) {
      chunk_total = partial[t];
    }
    for (var k = 0u; k < PER; k++) {
      let j = first + k;
      if (j < p.size) {
        run += vals[k];
        out[row_element(row, j)] = encode_out(run);
      }
    }
    workgroupBarrier();
    carry += chunk_total;
    // Nobody rewrites partial or chunk_total before every invocation has read them.
    workgroupBarrier();
  }
}

@compute @workgroup_size(WG)
fn rows_main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let row = linear_index(gid, nwg, WG);
  if (row >= p.rows) {
    return;
  }
  var run: C = C(0);
  for (var j = 0u; j < p.size; j++) {
    let e = row_element(row, j);
    run += load_x(src_at(e));
    out[e] = encode_out(run);
  }
}
