// Sums (or running sums) along the rows of a contiguous int64 [rows, len] tensor from element x_off, exact and
// wrapping modulo 2^64 as torch's int64 sum and cumsum: one invocation per row, adding in order.

fn int64_rows_at(r: u32) {
  var acc = vec2<u32>(0u, 0u);
  let base = p.x_off + r * p.len;
  for (var j = 0u; j < p.len; j++) {
    let k = base + j;
    acc = i64_add(acc, vec2<u32>(x[2u * k], x[2u * k + 1u]));
    {{EACH}}
  }
  {{END}}
}
