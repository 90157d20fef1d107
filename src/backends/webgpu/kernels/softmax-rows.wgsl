// Softmax / log-softmax of short rows (d <= 64), one invocation per row: many short rows (attention scores in
// prefill) would otherwise leave most of a workgroup per row idle. Same layout and NaN rules as softmax.wgsl.

struct Params {
  rows: u32,
  d: u32,
  inner: u32,
  offset: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> in0: array<u32>;

{{FUNCTIONS}}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let row = linear_index(gid, nwg, 64u);
  if (row >= p.rows) {
    return;
  }
  let base = p.offset + (row / p.inner) * p.d * p.inner + row % p.inner;
  var m = f32_bits(0xff800000u);
  var s = 0.0;
  for (var j = 0u; j < p.d; j++) {
    let r = merge(m, s, load0(base + j * p.inner), 1.0);
    m = r.x;
    s = r.y;
  }
  let row_max = m;
  let row_sum = row_sum_or_nan(vec2<f32>(m, s));
  let inv = 1.0 / row_sum;
  let log_sum = log(row_sum);
  let first = base - p.offset;
  for (var j = 0u; j < p.d; j += {{LANES}}u) {
{{STORE}}
  }
}
