// indexAdd of int64 (scatter_add of int64 data): output element e of out [outer, size, inner] is the sum of
// source[o, i, c] over the positions i whose index is s, in increasing i along the chains index-add-chain.wgsl
// linked, added exactly in two 32-bit words with a carry (wrapping modulo 2^64, as torch). One invocation per
// output element writes both of its words, so no two invocations share a word and no atomics are needed. src is
// contiguous int64 words (lo, hi) from element p.src_off. The header and the loop come from webgpu.ts.

const END = 0xffffffffu;

fn index_add_int64_at(e: u32) {
  let c = e % p.inner;
  let s = (e / p.inner) % p.size;
  let base = (e / (p.inner * p.size)) * p.t * p.inner + c;
  var lo = 0u;
  var hi = 0u;
  var i = head[s];
  loop {
    if (i == END) {
      break;
    }
    let w = 2u * (p.src_off + base + i * p.inner);
    let add_lo = src[w];
    let sum = lo + add_lo;
    hi = hi + src[w + 1u] + select(0u, 1u, sum < lo);
    lo = sum;
    i = next[i];
  }
  out[2u * e] = lo;
  out[2u * e + 1u] = hi;
}
