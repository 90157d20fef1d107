// Launcher of attention (attention.wgsl, attention-merge.wgsl). One workgroup per (query block, kv head, head
// block) streams the keys with an online softmax; when that gives too few workgroups to fill a GPU (decode over a
// long cache: one per kv head), the keys are split into chunks across workgroups and a second dispatch merges the
// chunks' states (flash-decoding).
import { lanesPerWord, type DType } from '../../../core/dtype.js';
import { ShapeError } from '../../../core/errors.js';
import { numel } from '../../../core/shape.js';
import type { AttentionOptions } from '../../backend.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../gpu-context.js';
import { viaFloat32, type GpuOperand } from './elementwise.js';
import { pow2AtLeast, uniformWords } from './nn-util.js';
import { commonWgsl, encodeFn, fillTemplate, grid1d, loadFn, wgslSource } from './wgsl.js';

const WG = 64;
/** Rows (query x head pairs) one workgroup serves, at most; their q rows sit in workgroup memory. */
const MAX_ROWS = 8;
const MAX_Q_FLOATS = 2048;
/** Split the keys when fewer workgroups than this would run, in chunks of at least MIN_CHUNK keys. */
const TARGET_WORKGROUPS = 256;
const MIN_CHUNK = 256;
const MAX_SPLITS = 64;

/**
 * `queryOffsetFrom` (int32 [1] on the device), when given, is added to options.queryOffset inside the kernel: a
 * captured decode step attends over the whole cache (Skv = its capacity) with the position read from a buffer, the
 * causal mask hiding the rows not yet written.
 */
export function attentionKernel(ctx: GpuContext, q: GpuOperand, k: GpuOperand, v: GpuOperand, options: AttentionOptions, outDtype: DType = q.dtype, queryOffsetFrom?: GpuOperand): GpuBuffer {
  const [sq, hq, d] = q.view.shape;
  const [skv, hkv] = k.view.shape;
  const n = numel(q.view.shape);
  const lanes = lanesPerWord(outDtype);
  if (lanes > 1 && d % lanes !== 0) {
    // Rows would share packed output words between workgroups.
    return viaFloat32(ctx, q.view.shape, outDtype, false, () => attentionKernel(ctx, q, k, v, options, 'float32', queryOffsetFrom));
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
  const gq = Math.max(1, Math.min(sq, Math.floor(rowTarget / gh)));
  const hblocks = group / gh;
  const base = Math.ceil(sq / gq) * hkv * hblocks;
  let splits = 1;
  let chunk = Math.max(skv, 1);
  if (skv >= 2 * MIN_CHUNK && base < TARGET_WORKGROUPS) {
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
  const finish = splits > 1 ? SPLIT_FINISH : SINGLE_FINISH;
  const dynamic = queryOffsetFrom !== undefined;
  const qoff = {
    QOFF_BINDING: dynamic ? '@group(0) @binding(5) var<storage, read> qoff_buf: array<i32>;' : '',
    QUERY_OFFSET: dynamic ? '(p.query_offset + qoff_buf[p.qoff_at])' : 'p.query_offset',
  };
  const key = ['attention', q.dtype, k.dtype, v.dtype, outDtype, rows, rounds, dq, splits > 1, dynamic ? 'qoff-buffer' : 'qoff-uniform'].join('|');
  const pipeline = ctx.pipeline(key, () =>
    commonWgsl() +
    fillTemplate(wgslSource(import.meta.url, 'attention.wgsl'), {
      FUNCTIONS: loadFn('load_q', 'q_buf', q.dtype, 'f32') + loadFn('load_k', 'k_buf', k.dtype, 'f32') + loadFn('load_v', 'v_buf', v.dtype, 'f32') + encodeFn('encode_out', outDtype, 'f32'),
      ROWS: rows,
      Q_FLOATS: rows * dq,
      LANES: lanes,
      ROUNDS: rounds,
      FINISH: fillTemplate(finish, { BITS: 32 / lanes }),
      ...qoff,
    }),
  );
  const total = base * splits;
  const params = uniformWords([
    sq, hq, skv, hkv,
    d, gh, gq, group, hblocks, splits, chunk,
    options.causal ? 1 : 0, { i32: queryOffset }, { f32: options.scale }, total,
    q.view.offset, ...q.view.strides,
    k.view.offset, ...k.view.strides,
    v.view.offset, ...v.view.strides,
    accBase, queryOffsetFrom?.view.offset ?? 0,
  ]);
  const extra = queryOffsetFrom ? [queryOffsetFrom.buffer] : [];
  if (splits === 1) {
    ctx.dispatch(pipeline, params, [out, q.buffer, k.buffer, v.buffer, ...extra], grid1d(total, 1));
    return out;
  }
  const partials = ctx.alloc(accBase * 4 + rowsTotal * splits * d * 4);
  try {
    ctx.dispatch(pipeline, params, [partials, q.buffer, k.buffer, v.buffer, ...extra], grid1d(total, 1));
    const merge = ctx.pipeline(['attention-merge', outDtype, dynamic ? 'qoff-buffer' : 'qoff-uniform'].join('|'), () =>
      commonWgsl() +
      fillTemplate(wgslSource(import.meta.url, 'attention-merge.wgsl'), {
        FUNCTIONS: encodeFn('encode_out', outDtype, 'f32'),
        LANES: lanes,
        BITS: 32 / lanes,
        QOFF_BINDING: dynamic ? '@group(0) @binding(3) var<storage, read> qoff_buf: array<i32>;' : '',
        QUERY_OFFSET: qoff.QUERY_OFFSET,
      }),
    );
    const mergeParams = uniformWords([n, d, hq, splits, skv, options.causal ? 1 : 0, { i32: queryOffset }, accBase, queryOffsetFrom?.view.offset ?? 0]);
    ctx.dispatch(merge, mergeParams, [out, partials, ...extra], grid1d(Math.ceil(n / lanes), 256));
    return out;
  } finally {
    ctx.release(partials);
  }
}

/** The end of attention.wgsl's main with one split: normalize and write this invocation's output words. */
const SINGLE_FINISH = `  for (var r = 0u; r < ROWS; r++) {
    let i = row_query(qb, r);
    if (i < p.sq) {
      let out_base = (i * p.hq + row_head(kh, hb, r)) * p.d;
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
            word |= encode_out(x) << (lane * {{BITS}}u);
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
