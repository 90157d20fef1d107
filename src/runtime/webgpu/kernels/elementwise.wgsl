// Elementwise map over strided views, one output word (1, 2 or 4 packed elements) per invocation, so packed dtypes
// are written without races. Inputs are read in place through their views: broadcasting (stride 0), transposes
// and slices need no copy first. The header, `op` (the op's expression, map-ops.ts) and the loop come from the
// description in elementwise.ts; the generated loads read argument k of element e in its compute type.

fn map_element(e: u32) -> OutC {
{{LOADS}}
  return op({{ARGS}});
}
