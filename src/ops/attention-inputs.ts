// One layer's attention inputs in one kernel: from the fused q|k|v projection, Qwen3's per-head q/k RMSNorm and
// rotate-half RoPE (of the whole head, or of its first R dims: partial rotary, Qwen3.5), k and v written into the
// KV caches at the current position, q returned. It replaces six dispatches (two norms, two ropes, two cache
// copies) per layer and token. The position may be a device scalar, so a captured decode step can advance it
// without recording new work.
import { runKernel } from '../kernels/registry.js';
import { lanesPerWord } from '../core/dtype.js';
import { FP8_KV_DTYPE, kvRowWidth } from '../core/kv-fp8.js';
import { ShapeError } from '../core/errors.js';
import { formatShape } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { compact } from './shape-ops.js';
import { checkPagedIndex, pagedKv, type PagedIndex } from './paged-cache.js';
import { commonBackend, requireDeviceScalar, requireDTypes, wrap } from './util.js';

const FLOAT_DTYPES = ['float32', 'float16', 'bfloat16'] as const;
/** KV-cache dtypes: the float ones, and FP8 as scaled rows [capacity, kvHeads, kvRowWidth] (core/kv-fp8.ts). */
export const KV_DTYPES = [...FLOAT_DTYPES, FP8_KV_DTYPE] as const;

export interface AttentionInputsOptions {
  heads: number;
  kvHeads: number;
  headDim: number;
  /** Per-head RMSNorm weights [headDim] of q and k (Qwen3), both or neither. */
  qNorm?: Tensor;
  kNorm?: Tensor;
  /** Default 1e-6. */
  eps?: number;
  /**
   * float32 RoPE tables [P, R / 2] (models/qwen3/rope.ts): R = headDim rotates the whole head; R < headDim (partial
   * rotary, R = int(headDim * partial_rotary_factor), even) rotates dims 0..R-1 and passes the rest through.
   */
  cos: Tensor;
  sin: Tensor;
  /**
   * KV caches [capacity, kvHeads, headDim] (float32, float16, bfloat16), or float8_e4m3fn [capacity, kvHeads,
   * kvRowWidth(headDim)] holding scaled rows (core/kv-fp8.ts), written in place at rows position .. position + S - 1.
   */
  keys: Tensor;
  values: Tensor;
  /** Row of token 0: a number, or an int32 [1] tensor on the device (read by the kernel; not checked on the host). */
  position: number | Tensor;
  /**
   * A paged cache: keys / values are the shared pools, and each token's position and page table come from the index
   * (pagedIndex; `position` is then ignored): one dispatch writes the rows of a whole batch of sequences.
   */
  pages?: PagedIndex;
}

/**
 * The rotary dim R of RoPE tables cos, sin [P, R / 2] for heads of headDim: 2 * their width, which must be even and
 * 2 <= R <= headDim (R < headDim: partial rotary, the dims from R on pass through).
 */
export function ropeTableRotaryDim(op: string, cos: Tensor, sin: Tensor, headDim: number): number {
  const r = cos.ndim === 2 ? 2 * cos.shape[1] : NaN;
  if (cos.ndim !== 2 || sin.shape.join() !== cos.shape.join() || !(r >= 2 && r <= headDim && r % 2 === 0)) {
    throw new ShapeError(
      `${op}: cos and sin must both be [P, R / 2] with R (the rotary dim) even and 2 <= R <= ${headDim} (headDim; R = ${headDim} for full rotary: [P, ${headDim / 2}]), got ${formatShape(cos.shape)} and ${formatShape(sin.shape)}`,
    );
  }
  return r;
}

/** qkv [S, (heads + 2 kvHeads) * headDim] -> q [S, heads, headDim]; k, v land in the caches. */
export function attentionInputs(qkv: Tensor, o: AttentionInputsOptions): Tensor {
  const dynamic = typeof o.position !== 'number' ? o.position : undefined;
  const extra = [o.qNorm, o.kNorm, dynamic].filter((t): t is Tensor => t !== undefined);
  const backend = commonBackend('attentionInputs', qkv, o.cos, o.sin, o.keys, o.values, ...extra, ...(o.pages ? [o.pages.index] : []));
  const { heads, kvHeads, headDim: d } = o;
  for (const [name, v] of [
    ['heads', heads],
    ['kvHeads', kvHeads],
    ['headDim', d],
  ] as const) {
    if (!Number.isInteger(v) || v <= 0) throw new RangeError(`attentionInputs: ${name} must be a positive integer, got ${v}`);
  }
  if (d % 2 !== 0) throw new ShapeError(`attentionInputs: headDim must be even for RoPE, got ${d}`);
  requireDTypes('attentionInputs', qkv, FLOAT_DTYPES);
  const width = (heads + 2 * kvHeads) * d;
  if (qkv.ndim !== 2 || qkv.shape[1] !== width)
    throw new ShapeError(`attentionInputs: qkv must be [S, ${width}] ((${heads} + 2 x ${kvHeads}) x ${d}), got ${formatShape(qkv.shape)}`);
  if ((o.qNorm === undefined) !== (o.kNorm === undefined)) throw new ShapeError('attentionInputs: give both qNorm and kNorm, or neither');
  for (const w of [o.qNorm, o.kNorm]) {
    if (!w) continue;
    requireDTypes('attentionInputs', w, FLOAT_DTYPES);
    if (w.ndim !== 1 || w.shape[0] !== d) throw new ShapeError(`attentionInputs: norm weights must be [${d}], got ${formatShape(w.shape)}`);
  }
  requireDTypes('attentionInputs', o.cos, ['float32']);
  requireDTypes('attentionInputs', o.sin, ['float32']);
  const rotaryDim = ropeTableRotaryDim('attentionInputs', o.cos, o.sin, d);
  for (const [name, c] of [
    ['keys', o.keys],
    ['values', o.values],
  ] as const) {
    requireDTypes('attentionInputs', c, KV_DTYPES);
    const width = kvRowWidth(c.dtype, d);
    if (c.ndim !== 3 || c.shape[1] !== kvHeads || c.shape[2] !== width)
      throw new ShapeError(
        `attentionInputs: ${name} must be [capacity, ${kvHeads}, ${width}]${width === d ? '' : ` (${c.dtype} rows: ${d} codes, padding to a word, a 4-byte scale)`}, got ${formatShape(c.shape)}`,
      );
    const lanes = lanesPerWord(c.dtype);
    if (c.strides[2] !== 1 || c.offset % lanes !== 0 || c.strides[0] % lanes !== 0 || c.strides[1] % lanes !== 0 || width % lanes !== 0) {
      throw new ShapeError(`attentionInputs: ${name} ${c.describe()} must have unit last stride and whole ${c.dtype} words per row`);
    }
  }
  const s = qkv.shape[0];
  if (o.pages) {
    checkPagedIndex('attentionInputs', o.pages, o.keys, s);
    if (o.pages.maxLength > o.cos.shape[0])
      throw new ShapeError(`attentionInputs: positions up to ${o.pages.maxLength - 1} are outside the RoPE table (${o.cos.shape[0]} positions)`);
  } else if (dynamic) {
    requireDeviceScalar('attentionInputs', 'a position tensor', dynamic, 'int32');
  } else {
    const p = o.position as number;
    const rows = Math.min(o.keys.shape[0], o.cos.shape[0]);
    if (!Number.isInteger(p) || p < 0 || p + s > rows) {
      throw new ShapeError(
        `attentionInputs: positions ${p}..${p + s - 1} do not fit the cache (${o.keys.shape[0]} rows) and RoPE table (${o.cos.shape[0]} positions)`,
      );
    }
  }
  const eps = o.eps ?? 1e-6;
  if (!(eps >= 0) || !Number.isFinite(eps)) throw new RangeError(`attentionInputs: eps must be a finite number >= 0, got ${eps}`);
  // Kernels index rows with unit last strides; anything else is compacted first (weights and tables normally are).
  const unit = (t: Tensor) => (t.ndim === 0 || t.strides[t.ndim - 1] === 1 ? undefined : compact(t));
  const copies = { qkv: unit(qkv), qNorm: o.qNorm && unit(o.qNorm), kNorm: o.kNorm && unit(o.kNorm), cos: unit(o.cos), sin: unit(o.sin) };
  try {
    const handle = runKernel('attentionInputs', backend, {
      qkv: (copies.qkv ?? qkv).operand(),
      qNorm: o.qNorm && (copies.qNorm ?? o.qNorm).operand(),
      kNorm: o.kNorm && (copies.kNorm ?? o.kNorm).operand(),
      eps,
      cos: (copies.cos ?? o.cos).operand(),
      sin: (copies.sin ?? o.sin).operand(),
      keys: o.keys.operand(),
      values: o.values.operand(),
      position: dynamic ? 0 : (o.position as number),
      positionFrom: dynamic?.operand(),
      pages: o.pages && pagedKv(o.pages),
      heads,
      kvHeads,
      headDim: d,
      rotaryDim,
    });
    return wrap(backend, handle, qkv.dtype, [s, heads, d]);
  } finally {
    for (const c of Object.values(copies)) c?.dispose();
  }
}
