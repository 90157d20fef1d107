// Sort of every row (the middle dim of a logical [outer, n, inner] input) by a bitonic network over the row padded
// to P = 2^m elements, giving the sorted positions' indices (torch.sort / topk's indices; values are gathered from
// them). Each element is a (key, index) pair compared lexicographically: the key is a u32 whose unsigned order is
// torch's order of the values (NaN above +Inf, -0 equal to +0; inverted when descending), and the index breaks ties,
// so the result is stable and the same on every run. Padding pairs are (0xffffffff, 0xffffffff): above every real
// pair, so they end past the row. C is the values' compute type; src_at, key_of and the header come from webgpu.ts.
//
// One workgroup per block of p.block (<= P, <= CAPACITY) pairs of a row, in workgroup memory. Loaded from x it runs
// every stage up to p.block; loaded from the scratch it runs the steps below p.block of stage p.k. (Loop bounds
// are uniforms, not constants: a compiler that unrolls the network takes seconds per pipeline on software
// adapters.) FINAL: the block is
// the whole row or the last step of the last stage: the first p.out_count indices go to `out`; else the pairs go
// back to the scratch. The steps with j >= p.block are sort-merge.wgsl's, one dispatch each.

const PAD = 0xffffffffu;

var<workgroup> skey: array<u32, CAPACITY>;
var<workgroup> sid: array<u32, CAPACITY>;

fn pair_less(ka: u32, ia: u32, kb: u32, ib: u32) -> bool {
  return ka < kb || (ka == kb && ia < ib);
}

// Logical element index of position j of row `row` in [outer, len, inner].
fn row_element(row: u32, j: u32, len: u32) -> u32 {
  return ((row / p.inner) * len + j) * p.inner + row % p.inner;
}

// One compare-exchange step (stage kk, distance jj) over the block in workgroup memory; base: the block's first
// position in its row (the direction of a pair depends on its position in the row).
fn block_step(t: u32, base: u32, kk: u32, jj: u32) {
  for (var h = t; h < p.block / 2u; h += WG) {
    let i = (h / jj) * 2u * jj + h % jj;
    let l = i + jj;
    let ascending = ((base + i) & kk) == 0u;
    let ki = skey[i];
    let ii = sid[i];
    let kl = skey[l];
    let il = sid[l];
    if (pair_less(kl, il, ki, ii) == ascending) {
      skey[i] = kl;
      sid[i] = il;
      skey[l] = ki;
      sid[l] = ii;
    }
  }
  workgroupBarrier();
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let g = wid.x + wid.y * nwg.x;
  let blocks = p.p2 / p.block;
  // Workgroup-uniform: the whole workgroup returns or none of it.
  if (g >= p.rows * blocks) {
    return;
  }
  let row = g / blocks;
  let base = (g % blocks) * p.block;
  let t = lid.x;
  for (var i = t; i < p.block; i += WG) {
    let j = base + i;
{{LOAD}}
  }
  workgroupBarrier();
{{STEPS}}
  for (var i = t; i < p.block; i += WG) {
    let j = base + i;
{{STORE}}
  }
}
