// Launcher of attention (attention.wgsl, attention-merge.wgsl). One workgroup per (query block, kv head, head
// block) streams the keys with an online softmax; when that gives too few workgroups to fill a GPU (decode over a
// long cache: one per kv head), the keys are split into chunks across workgroups and a second dispatch merges the
// chunks' states (flash-decoding).
import { lanesPerWord, type DType } from '../../core/dtype.js';
import { isScaledKv, kvScaleAt } from '../../core/kv-fp8.js';
import { ShapeError } from '../../core/errors.js';
import { numel } from '../../core/shape.js';
import type { AttentionOptions, PagedKv } from '../../runtime/backend.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import { viaFloat32, type GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { pow2AtLeast } from '../../runtime/webgpu/kernels/nn-util.js';
import { grid1d } from '../../runtime/webgpu/kernels/wgsl.js';

const WG = 64;
/** Rows (query x head pairs) one workgroup serves, at most; their q rows sit in workgroup memory. */
const MAX_ROWS = 8;
const MAX_Q_FLOATS = 2048;
/** Split the keys when fewer workgroups than this would run, in chunks of at least MIN_CHUNK keys. */
const TARGET_WORKGROUPS = 256;
const MIN_CHUNK = 256;
const MAX_SPLITS = 64;
/**
 * Paged attention always takes the split path with this many keys a split, whatever the batch: a query's splits
 * and their merge order then depend on its own length only (splits past it are empty and merge as exact zeros), so
 * its result is the same bits alone or beside longer sequences (batch invariance).
 */
const PAGED_CHUNK = 256;

/**
 * WGSL `cache_row(j)`: a key's row in the k / v operands, j itself or (paged) through the page table that starts
 * at `table_at` in `pages` (the batch index; set per workgroup by the kernel).
 */
export function cacheRowFn(paged: boolean): string {
  if (!paged) return 'fn cache_row(j: u32) -> u32 {\n  return j;\n}';
  return 'var<private> table_at: u32;\nfn cache_row(j: u32) -> u32 {\n  return u32(pages[table_at + j / p.page_size]) * p.page_size + j % p.page_size;\n}';
}

/**
 * WGSL `visible(i)`: how many keys query i sees. Paged, query i is row i of the batch index and sees its own
 * sequence's keys 0..position_i; else all keys, or causally up to its offset.
 */
function visibleFn(qoffBuffer: boolean, paged: boolean): string {
  if (paged) return 'fn visible(i: u32) -> u32 {\n  return min(u32(pages[p.pages_at + 2u * i]) + 1u, p.skv);\n}';
  return `fn visible(i: u32) -> u32 {
  if (p.causal == 0u) {
    return p.skv;
  }
  return u32(clamp(i32(i) + ${queryOffsetExpr(qoffBuffer)} + 1, 0, i32(p.skv)));
}`;
}

/**
 * WGSL `k_scale(row)` / `v_scale(row)`: the scale of the cache row starting at element `row`, an FP8 cache's
 * float32 word after the codes (core/kv-fp8.ts), or 1.
 */
function kvScaleFns(k: DType, v: DType): string {
  const fn = (name: string, buffer: string, dtype: DType) =>
    isScaledKv(dtype)
      ? `fn ${name}(row: u32) -> f32 {\n  return bitcast<f32>(${buffer}[(row + p.kv_scale_at) >> 2u]);\n}\n`
      : `fn ${name}(row: u32) -> f32 {\n  return 1.0;\n}\n`;
  return fn('k_scale', 'k', k) + fn('v_scale', 'v', v);
}

/** The gate variant of a launch without one. */
const NO_GATE = 'none';

/**
 * WGSL `gated(i, h, c, x)`: output element (query i, head h, dim c) of value x, times sigmoid of the gate's element
 * (read through its strides: usually a column view of a wider projection) when the variant has one. NaN in the gate
 * reaches the output (exp is left to the driver for NaN, so it is selected explicitly).
 */
function gateFn(gate: string): string {
  if (gate === NO_GATE) return 'fn gated(i: u32, h: u32, c: u32, x: f32) -> f32 {\n  return x;\n}\n';
  return `fn gated(i: u32, h: u32, c: u32, x: f32) -> f32 {
  let g = load_gate(p.g_off + i * p.gs0 + h * p.gs1 + c * p.gs2);
  return x * select(1.0 / (1.0 + exp(-g)), g, is_nan(g));
}
`;
}

/** The query offset, plus the device value when a captured step reads it from qoff_buf. */
const queryOffsetExpr = (qoffBuffer: boolean) => (qoffBuffer ? '(p.query_offset + qoff_buf[p.qoff_at])' : 'p.query_offset');

const attention = defineKernel({
  name: 'attention',
  source: 'attention.wgsl',
  // gate: the gate's dtype, or NO_GATE (always so with splits: the merge applies it).
  variant: {
    q: 'dtype',
    k: 'dtype',
    v: 'dtype',
    out: 'dtype',
    rows: 'number',
    rounds: 'number',
    dq: 'number',
    split: 'boolean',
    qoffBuffer: 'boolean',
    paged: 'boolean',
    gate: 'string',
  },
  params: {
    sq: 'u32',
    hq: 'u32',
    skv: 'u32',
    hkv: 'u32',
    d: 'u32',
    gh: 'u32',
    gq: 'u32',
    group: 'u32',
    hblocks: 'u32',
    splits: 'u32',
    chunk: 'u32',
    causal: 'u32',
    query_offset: 'i32',
    scale: 'f32',
    total_wg: 'u32',
    q_off: 'u32',
    qs0: 'u32',
    qs1: 'u32',
    qs2: 'u32',
    k_off: 'u32',
    ks0: 'u32',
    ks1: 'u32',
    ks2: 'u32',
    v_off: 'u32',
    vs0: 'u32',
    vs1: 'u32',
    vs2: 'u32',
    acc_base: 'u32',
    qoff_at: 'u32',
    page_size: 'u32',
    pages_at: 'u32',
    g_off: 'u32',
    gs0: 'u32',
    gs1: 'u32',
    gs2: 'u32',
    kv_scale_at: 'u32',
  },
  // With key splits `out` is the float32 partials (raw bits), else the packed output.
  outputs: { out: { packed: 'out' } },
  inputs: {
    q: { packed: 'q' },
    k: { packed: 'k' },
    v: { packed: 'v' },
    qoff_buf: { type: 'i32', when: (v) => v.qoffBuffer },
    pages: { type: 'i32', when: (v) => v.paged },
    gate: { packed: (v) => v.gate as DType, when: (v) => v.gate !== NO_GATE },
  },
  grid: 'custom',
  workgroupSize: WG,
  constants: (v) => ({ ROWS: v.rows, LANES: lanesPerWord(v.out), BITS: 32 / lanesPerWord(v.out), ROUNDS: v.rounds, Q_FLOATS: v.rows * v.dq }),
  functions: (v) => gateFn(v.gate) + kvScaleFns(v.k, v.v),
  code: (v) => ({
    FINISH: v.split ? SPLIT_FINISH : SINGLE_FINISH,
    VISIBLE: visibleFn(v.qoffBuffer, v.paged),
    CACHE_ROW: cacheRowFn(v.paged),
    TABLE_AT: v.paged ? '  table_at = p.pages_at + u32(pages[p.pages_at + 2u * qb + 1u]);' : '',
  }),
});

const attentionMerge = defineKernel({
  name: 'attention-merge',
  source: 'attention-merge.wgsl',
  variant: { out: 'dtype', qoffBuffer: 'boolean', paged: 'boolean', gate: 'string' },
  params: {
    n: 'u32',
    d: 'u32',
    hq: 'u32',
    splits: 'u32',
    skv: 'u32',
    causal: 'u32',
    query_offset: 'i32',
    acc_base: 'u32',
    qoff_at: 'u32',
    pages_at: 'u32',
    g_off: 'u32',
    gs0: 'u32',
    gs1: 'u32',
    gs2: 'u32',
  },
  outputs: { out: { packed: 'out' } },
  inputs: {
    part: 'f32',
    qoff_buf: { type: 'i32', when: (v) => v.qoffBuffer },
    pages: { type: 'i32', when: (v) => v.paged },
    gate: { packed: (v) => v.gate as DType, when: (v) => v.gate !== NO_GATE },
  },
  grid: { words: 'n', element: 'merged' },
  functions: (v) => gateFn(v.gate),
  code: (v) => ({ VISIBLE: visibleFn(v.qoffBuffer, v.paged) }),
});

/**
 * `queryOffsetFrom` (int32 [1] on the device), when given, is added to options.queryOffset inside the kernel: a
 * captured decode step attends over the whole cache (Skv = its capacity) with the position read from a buffer, the
 * causal mask hiding the rows not yet written. With `pages`, k and v are a paged cache's pools and each query row
 * reads its own sequence's keys through its page table (see PAGED_CHUNK).
 */
export function attentionKernel(
  ctx: GpuContext,
  q: GpuOperand,
  k: GpuOperand,
  v: GpuOperand,
  options: AttentionOptions,
  outDtype: DType = q.dtype,
  queryOffsetFrom?: GpuOperand,
  pages?: PagedKv<GpuBuffer>,
  gate?: GpuOperand,
): GpuBuffer {
  const [sq, hq, d] = q.view.shape;
  // An FP8 cache's rows are wider than d (their scale follows the codes).
  const [poolRows, hkv] = k.view.shape;
  const skv = pages ? pages.maxLength : poolRows;
  const n = numel(q.view.shape);
  const lanes = lanesPerWord(outDtype);
  if (lanes > 1 && d % lanes !== 0) {
    // Rows would share packed output words between workgroups.
    return viaFloat32(ctx, q.view.shape, outDtype, false, () => attentionKernel(ctx, q, k, v, options, 'float32', queryOffsetFrom, pages, gate));
  }
  const out = ctx.alloc(wordBytes(n, lanes));
  if (n === 0) return out;
  if (d > MAX_Q_FLOATS) throw new ShapeError(`attention: the WebGPU kernel supports head dims up to ${MAX_Q_FLOATS}, got ${d}`);

  const group = hq / hkv;
  // Workgroup memory sized to the shape (a 2048-float array made SwiftShader's compiles 5x slower); powers of two,
  // so rows * dq <= MAX_Q_FLOATS.
  const dq = Math.max(64, pow2AtLeast(d));
  const rowTarget = Math.min(MAX_ROWS, MAX_Q_FLOATS / dq);
  let gh = Math.min(group, rowTarget);
  while (group % gh !== 0) gh--;
  // Paged, every query row may be another sequence's: one query per workgroup.
  const gq = pages ? 1 : Math.max(1, Math.min(sq, Math.floor(rowTarget / gh)));
  const hblocks = group / gh;
  const base = Math.ceil(sq / gq) * hkv * hblocks;
  let splits = 1;
  let chunk = Math.max(skv, 1);
  if (pages) {
    chunk = PAGED_CHUNK;
    splits = Math.max(1, Math.ceil(skv / chunk));
  } else if (skv >= 2 * MIN_CHUNK && base < TARGET_WORKGROUPS) {
    const want = Math.min(MAX_SPLITS, Math.ceil(skv / MIN_CHUNK), Math.ceil(TARGET_WORKGROUPS / base));
    chunk = Math.ceil(Math.ceil(skv / want) / WG) * WG;
    splits = Math.ceil(skv / chunk);
  }
  // Offsets past either end of the keys all mean "every key" or "no key": clamping keeps i + offset in i32.
  const queryOffset = Math.max(-sq - 1, Math.min(skv, options.queryOffset));
  const rowsTotal = sq * hq;
  const accBase = rowsTotal * splits * 2;

  // Pipelines are per power of two of rows and of output rounds, not per shape.
  const rows = pow2AtLeast(gh * gq);
  const rounds = pow2AtLeast(Math.ceil(d / (WG * lanes)));
  const qoffBuffer = queryOffsetFrom !== undefined;
  const total = base * splits;
  const common = {
    causal: options.causal ? 1 : 0,
    query_offset: queryOffset,
    acc_base: accBase,
    qoff_at: queryOffsetFrom?.view.offset ?? 0,
    g_off: gate?.view.offset ?? 0,
    gs0: gate?.view.strides[0] ?? 0,
    gs1: gate?.view.strides[1] ?? 0,
    gs2: gate?.view.strides[2] ?? 0,
  };
  const paging = { page_size: pages?.pageSize ?? 1, pages_at: pages?.index.view.offset ?? 0 };
  const params = {
    ...common,
    ...paging,
    sq,
    hq,
    skv,
    hkv,
    d,
    gh,
    gq,
    group,
    hblocks,
    splits,
    chunk,
    scale: options.scale,
    total_wg: total,
    q_off: q.view.offset,
    qs0: q.view.strides[0],
    qs1: q.view.strides[1],
    qs2: q.view.strides[2],
    k_off: k.view.offset,
    ks0: k.view.strides[0],
    ks1: k.view.strides[1],
    ks2: k.view.strides[2],
    v_off: v.view.offset,
    vs0: v.view.strides[0],
    vs1: v.view.strides[1],
    vs2: v.view.strides[2],
    kv_scale_at: kvScaleAt(d),
  };
  const split = splits > 1 || pages !== undefined;
  const gateDtype = gate?.dtype ?? NO_GATE;
  const variant = {
    q: q.dtype,
    k: k.dtype,
    v: v.dtype,
    out: outDtype,
    rows,
    rounds,
    dq,
    split,
    qoffBuffer,
    paged: pages !== undefined,
    gate: split ? NO_GATE : gateDtype,
  };
  const inputs = {
    q: q.buffer,
    k: k.buffer,
    v: v.buffer,
    qoff_buf: queryOffsetFrom?.buffer,
    pages: pages?.index.handle,
    gate: split ? undefined : gate?.buffer,
  };
  const workgroups = grid1d(total, 1);
  if (!variant.split) {
    attention.run(ctx, variant, params, { out, ...inputs }, { workgroups });
    return out;
  }
  const partials = ctx.alloc(accBase * 4 + rowsTotal * splits * d * 4);
  try {
    attention.run(ctx, variant, params, { out: partials, ...inputs }, { workgroups });
    attentionMerge.run(
      ctx,
      { out: outDtype, qoffBuffer, paged: variant.paged, gate: gateDtype },
      { ...common, n, d, hq, splits, skv, pages_at: paging.pages_at },
      { out, part: partials, qoff_buf: queryOffsetFrom?.buffer, pages: pages?.index.handle, gate: gate?.buffer },
    );
    return out;
  } finally {
    ctx.release(partials);
  }
}

/** The end of attention.wgsl's main with one split: normalize and write this invocation's output words. */
const SINGLE_FINISH = `  for (var r = 0u; r < ROWS; r++) {
    let i = row_query(qb, r);
    if (i < p.sq) {
      let head = row_head(kh, hb, r);
      let out_base = (i * p.hq + head) * p.d;
      let seen = row_end[r] > key_begin;
      let nan_row = bad[r] || m[r] == f32_bits(0xff800000u);
      for (var round = 0u; round < ROUNDS; round++) {
        let c0 = (round * WG + t) * LANES;
        if (c0 < p.d) {
          var word = 0u;
          for (var lane = 0u; lane < LANES; lane++) {
            var x = 0.0;
            if (seen) {
              x = select(acc[r * RL + round * LANES + lane] / l[r], f32_bits(0x7fc00000u), nan_row);
            }
            word |= encode_out(gated(i, head, c0 + lane, x)) << (lane * BITS);
          }
          out[(out_base + c0) / LANES] = word;
        }
      }
    }
  }`;

/** The end of attention.wgsl's main with key splits: this split's (max, sum) and acc as float32 partials. */
const SPLIT_FINISH = `  for (var r = 0u; r < ROWS; r++) {
    let i = row_query(qb, r);
    if (i < p.sq) {
      let slot = (i * p.hq + row_head(kh, hb, r)) * p.splits + split;
      if (t == 0u) {
        out[slot * 2u] = bitcast<u32>(select(m[r], f32_bits(0x7fc00000u), bad[r]));
        out[slot * 2u + 1u] = bitcast<u32>(l[r]);
      }
      for (var a = 0u; a < RL; a++) {
        let c = ((a / LANES) * WG + t) * LANES + a % LANES;
        if (c < p.d) {
          out[p.acc_base + slot * p.d + c] = bitcast<u32>(acc[r * RL + a]);
        }
      }
    }
  }`;
