// Decode GEMV: out[m, n] = sum_k a[m, k] * w[n, k] for M <= 4 activation rows and a weight stored [N, K] with K
// contiguous (the layout of checkpoints). Every weight byte is read once, 16 bytes per load, and dequantized in
// registers; TPO invocations (16..64, fewer for short rows) share one output column and combine through workgroup memory.

struct Params {
  n: u32,
  k: u32,
  a_off: u32,
  a_sm: u32,
  a_sk: u32,
  b_off_chunks: u32,   // weight offset in 16-byte chunks
  b_row_chunks: u32,   // weight row stride in 16-byte chunks
  chunks: u32,         // whole chunks per row: floor(k / ELEMS_PER_CHUNK)
  k_blocks: u32,       // ceil(k / 128)
  up_rows: u32,        // with SwiGLU: the up row of output column n is weight row n + up_rows
  _pad1: u32,
  _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> in0: array<u32>;
@group(0) @binding(3) var<storage, read> in1: array<vec4<u32>>;
{{EXTRA_BINDINGS}}

{{FUNCTIONS}}

const TPO = {{TPO}}u;  // invocations per output column
const OPW = {{OPW}}u;  // output columns per workgroup: TPO * OPW = 256

var<workgroup> red: array<vec4<f32>, 256>;
{{LUT_DECL}}

// One output column's TPO-strided partial dot product with weight row n (the tail of the row included).
fn row_partial(n: u32, t: u32) -> vec4<f32> {
  var acc = vec4<f32>(0.0);   // one lane per activation row m
  let row = p.b_off_chunks + n * p.b_row_chunks;
  for (var c = t; c < p.chunks; c += TPO) {
    let chunk = in1[row + c];
    let k0 = c * {{ELEMS_PER_CHUNK}}u;
    var part = vec4<f32>(0.0);
{{CHUNK_BODY}}
    acc += part{{CHUNK_SCALE}};
  }
  // The last k % ELEMS_PER_CHUNK elements of the row, one per invocation.
  let k = p.chunks * {{ELEMS_PER_CHUNK}}u + t;
  if (k < p.k) {
    let w = load_w(row * {{ELEMS_PER_CHUNK}}u + k);
    acc += w * a_vec(k){{TAIL_SCALE}};
  }
  return acc;
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>{{SUBGROUP_BUILTINS}}) {
  let wg = wid.x + wid.y * nwg.x;
  let g = lid.x / TPO;
  let t = lid.x % TPO;
  let n = wg * OPW + g;
{{LUT_FILL}}
  var acc = vec4<f32>(0.0);
  if (n < p.n) {
    acc = row_partial(n, t);
  }
  // Sum the TPO partials of each output column into red[g * TPO].
{{REDUCE}}
{{SECOND_ROW}}
  if (lid.x == 0u) {
    let n0 = wg * OPW;
{{STORE}}
  }
}
