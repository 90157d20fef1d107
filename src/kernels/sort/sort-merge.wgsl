// One step (stage p.k, distance p.j >= the block) of the bitonic network of sort.wgsl over the scratch pairs of
// every row (rows of p.p2 pairs): one compare-exchange per invocation, in global memory. The header and the
// one-invocation-per-pair loop come from the description in webgpu.ts.

fn merge_pair(q: u32) {
  let half = p.p2 / 2u;
  let row = q / half;
  let h = q % half;
  let i = (h / p.j) * 2u * p.j + h % p.j;
  let a = row * p.p2 + i;
  let b = a + p.j;
  let ascending = (i & p.k) == 0u;
  let ka = keys[a];
  let ia = ids[a];
  let kb = keys[b];
  let ib = ids[b];
  if ((kb < ka || (kb == ka && ib < ia)) == ascending) {
    keys[a] = kb;
    ids[a] = ib;
    keys[b] = ka;
    ids[b] = ia;
  }
}
