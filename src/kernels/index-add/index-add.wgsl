// Second pass of indexAdd: output element e of out [outer, size, inner] (float32) is the sum of
// source[o, i, c] over the positions i whose index is s, in increasing i, following the chains that
// index-add-chain.wgsl linked (head[s], next[i]); 0 when no index is s. Every output element is written once and
// every source element read once: (size + t) * outer * inner work. src_at (contiguous, or through the strides of
// a view such as a broadcast gradient), the header and the one-word-per-invocation loop come from the description
// in webgpu.ts.

const END = 0xffffffffu;

fn index_add_at(e: u32) -> f32 {
  let c = e % p.inner;
  let s = (e / p.inner) % p.size;
  let base = (e / (p.inner * p.size)) * p.t * p.inner + c;
  var acc = 0.0;
  var i = head[s];
  loop {
    if (i == END) {
      break;
    }
    acc += load_src(src_at(base + i * p.inner));
    i = next[i];
  }
  return acc;
}
