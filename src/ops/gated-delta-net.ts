// The Gated DeltaNet's token mixing (Qwen3.5 / Qwen3.6's linear attention, transformers' Qwen3_5MoeGatedDeltaNet)
// after its projections, in one kernel: the causal depthwise conv + SiLU over q|k|v continued from a conv state,
// l2-normalised q and k, the gated delta rule continued from a recurrent state [Hv, dk, dv], and the gated RMSNorm
// with silu(z). Both states stay on the device and are rewritten by the same dispatch (as LFM2's shortConv keeps
// its state), so a decode step is one dispatch at any position and is captured like attention. On WebGPU a prompt
// of 64 tokens or more takes the chunked (WY / UT) form instead: four dispatches at any length, the same results.
import { runKernel } from '../kernels/registry.js';
import { ShapeError } from '../core/errors.js';
import { formatShape } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { tensor, zeros } from './creation.js';
import { cast } from './convert.js';
import { tidy } from '../core/scope.js';
import { cat, narrow, reshape } from './shape-ops.js';
import { commonBackend, requireDTypes, wrap } from './util.js';
import type { DeviceName } from '../runtime/backend.js';

const FLOAT = ['float32', 'float16', 'bfloat16'] as const;

/** The kernels' limits: the key head dim (q and k of a token sit in workgroup memory) and the conv's taps. */
export const GATED_DELTA_NET_MAX_KEY_DIM = 256;
export const GATED_DELTA_NET_MAX_CONV_KERNEL = 8;

export interface GatedDeltaNetGeometry {
  readonly keyHeads: number;
  readonly valueHeads: number;
  readonly keyDim: number;
  readonly valueDim: number;
  /** Taps of the conv. */
  readonly convKernel: number;
}

export interface GatedDeltaNetWeights {
  /** conv1d.weight [C, 1, K] or [C, K], C = 2 Hk dk + Hv dv. */
  readonly conv: Tensor;
  /** A_log [Hv] and dt_bias [Hv]. */
  readonly aLog: Tensor;
  readonly dtBias: Tensor;
  /** The gated norm's weight [dv] (used as is). */
  readonly norm: Tensor;
}

/** A sequence's state in one layer: float32, zeros before its first token. */
export interface GatedDeltaNetState {
  /** [Hv, K-1, 2 dk + dv]: each value head's last K-1 conv inputs (its key head's q and k, its v). */
  readonly conv: Tensor;
  /** [Hv, dk, dv]. */
  readonly recurrent: Tensor;
}

/** Zeroed states for a new sequence. */
export function newGatedDeltaNetState(g: GatedDeltaNetGeometry, device: DeviceName): GatedDeltaNetState {
  return {
    conv: zeros([g.valueHeads, g.convKernel - 1, 2 * g.keyDim + g.valueDim], { device }),
    recurrent: zeros([g.valueHeads, g.keyDim, g.valueDim], { device }),
  };
}

/** Bytes of one layer's state (conv + recurrent, float32): constant in the context length. */
export const gatedDeltaNetStateBytes = (g: GatedDeltaNetGeometry): number =>
  4 * g.valueHeads * ((g.convKernel - 1) * (2 * g.keyDim + g.valueDim) + g.keyDim * g.valueDim);

/** Several sequences in one call: their rows one after another, each continuing its own slot of the state pools. */
export interface GatedDeltaNetBatch {
  /** Rows of each sequence, in order (they add up to S). */
  readonly rows: readonly number[];
  /**
   * Each sequence's slot in the pools (distinct), checked here; may be left out with `index` (a captured step's
   * table, rewritten before each replay: its slots are the device's to read, padding rows sharing a scratch slot).
   */
  readonly slots?: readonly number[];
  /**
   * The same as int32 (first row, rows, slot) per sequence already on the device (one upload shared by every layer
   * of a forward, see shortConvSegmentTable); built here when absent.
   */
  readonly index?: Tensor;
}

/**
 * inputs: the projections' outputs as [S, width] rows (views of one stacked projection are fine): qkv [S, 2 Hk dk +
 * Hv dv], z [S, Hv dv], b and a [S, Hv]. Returns float32 [S, Hv dv], the gated-normed output ready for out_proj;
 * state.conv and state.recurrent are updated in place. With `batch`, the states are pools ([slots, Hv, K-1,
 * 2 dk + dv] and [slots, Hv, dk, dv]) and each sequence's rows continue its slot, in one dispatch.
 */
export function gatedDeltaNet(
  inputs: { qkv: Tensor; z: Tensor; b: Tensor; a: Tensor },
  weights: GatedDeltaNetWeights,
  state: GatedDeltaNetState,
  geometry: GatedDeltaNetGeometry & { eps: number },
  batch?: GatedDeltaNetBatch,
): Tensor {
  const { qkv, z, b, a } = inputs;
  const all = [qkv, z, b, a, weights.conv, weights.aLog, weights.dtBias, weights.norm, state.conv, state.recurrent];
  const backend = commonBackend('gatedDeltaNet', ...all);
  for (const [name, t] of [
    ['qkv', qkv],
    ['z', z],
    ['b', b],
    ['a', a],
    ['conv weight', weights.conv],
    ['A_log', weights.aLog],
    ['dt_bias', weights.dtBias],
    ['norm weight', weights.norm],
  ] as const) {
    requireDTypes(`gatedDeltaNet ${name}`, t, FLOAT);
  }
  requireDTypes('gatedDeltaNet conv state', state.conv, ['float32']);
  requireDTypes('gatedDeltaNet recurrent state', state.recurrent, ['float32']);
  const { keyHeads: hk, valueHeads: hv, keyDim: dk, valueDim: dv, convKernel: taps, eps } = geometry;
  for (const [name, n] of [
    ['keyHeads', hk],
    ['valueHeads', hv],
    ['keyDim', dk],
    ['valueDim', dv],
    ['convKernel', taps],
  ] as const) {
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`gatedDeltaNet: ${name} must be a positive integer, got ${n}`);
  }
  if (hv % hk !== 0) throw new RangeError(`gatedDeltaNet: valueHeads (${hv}) must be a multiple of keyHeads (${hk})`);
  if (dk > GATED_DELTA_NET_MAX_KEY_DIM) throw new RangeError(`gatedDeltaNet: keyDim must be at most ${GATED_DELTA_NET_MAX_KEY_DIM}, got ${dk}`);
  if (taps > GATED_DELTA_NET_MAX_CONV_KERNEL) throw new RangeError(`gatedDeltaNet: convKernel must be at most ${GATED_DELTA_NET_MAX_CONV_KERNEL}, got ${taps}`);
  const s = qkv.shape[0];
  const convDim = 2 * hk * dk + hv * dv;
  const expect = (name: string, t: Tensor, shape: number[]) => {
    if (t.shape.join() !== shape.join()) throw new ShapeError(`gatedDeltaNet: ${name} must be ${formatShape(shape)}, got ${formatShape(t.shape)}`);
  };
  if (qkv.ndim !== 2) throw new ShapeError(`gatedDeltaNet: qkv must be [S, ${convDim}], got ${formatShape(qkv.shape)}`);
  expect('qkv', qkv, [s, convDim]);
  expect('z', z, [s, hv * dv]);
  expect('b', b, [s, hv]);
  expect('a', a, [s, hv]);
  expect('A_log', weights.aLog, [hv]);
  expect('dt_bias', weights.dtBias, [hv]);
  expect('norm weight', weights.norm, [dv]);
  const slots = batch ? state.conv.shape[0] : 0;
  const pool = batch ? [slots] : [];
  expect('conv state', state.conv, [...pool, hv, taps - 1, 2 * dk + dv]);
  expect('recurrent state', state.recurrent, [...(batch ? [state.recurrent.shape[0]] : []), hv, dk, dv]);
  if (batch) {
    if (state.recurrent.shape[0] !== slots)
      throw new ShapeError(`gatedDeltaNet: the conv and recurrent pools must have as many slots, got ${slots} and ${state.recurrent.shape[0]}`);
    const ids = batch.slots;
    if (!ids && !batch.index) throw new RangeError('gatedDeltaNet: a batch needs its slots or its device index');
    if (ids && batch.rows.length !== ids.length)
      throw new RangeError(`gatedDeltaNet: batch.rows and batch.slots must have one entry per sequence, got ${batch.rows.length} and ${ids.length}`);
    if (batch.rows.some((r) => !Number.isInteger(r) || r < 0) || batch.rows.reduce((x, y) => x + y, 0) !== s) {
      throw new RangeError(`gatedDeltaNet: batch.rows must be counts adding up to the ${s} rows, got [${batch.rows.join(', ')}]`);
    }
    if (ids && (ids.some((k) => !Number.isInteger(k) || k < 0 || k >= slots) || new Set(ids).size !== ids.length)) {
      throw new RangeError(`gatedDeltaNet: batch.slots must be distinct slots below ${slots}, got [${ids.join(', ')}]`);
    }
    if (batch.index && (batch.index.dtype !== 'int32' || batch.index.shape.join() !== String(3 * batch.rows.length)))
      throw new ShapeError(`gatedDeltaNet: batch.index must be int32 [${3 * batch.rows.length}], got ${batch.index.dtype} ${formatShape(batch.index.shape)}`);
  }
  const conv = weights.conv.ndim === 3 && weights.conv.shape[1] === 1 ? reshape(weights.conv, [weights.conv.shape[0], weights.conv.shape[2]]) : weights.conv;
  const owned: Tensor[] = conv !== weights.conv ? [conv] : [];
  try {
    expect('conv weight', conv, [convDim, taps]);
    for (const [name, t] of [
      ['conv state', state.conv],
      ['recurrent state', state.recurrent],
    ] as const) {
      if (!t.isContiguous()) throw new ShapeError(`gatedDeltaNet: the ${name} is updated in place and must be contiguous`);
    }
    // The kernels bind the four inputs as one buffer and the three per-head parameters as another: views of one
    // storage in one dtype pass as they are (a stacked projection, the model's packed parameters); anything else is
    // packed here, one copy.
    const [pqkv, pz, pb, pa] = oneStorage([qkv, z, b, a], 1, owned);
    const [aLog, dtBias, norm] = oneStorage([weights.aLog, weights.dtBias, weights.norm], 0, owned);
    let segments: { index: ReturnType<Tensor['operand']>; count: number } | undefined;
    if (batch) {
      let index = batch.index;
      if (!index) {
        const table: number[] = [];
        let first = 0;
        batch.rows.forEach((rows, i) => {
          table.push(first, rows, batch.slots![i]);
          first += rows;
        });
        index = tensor(table, { dtype: 'int32', device: qkv.device });
        owned.push(index);
      }
      segments = { index: index.operand(), count: batch.rows.length };
    }
    const handle = runKernel('gatedDeltaNet', backend, {
      segments,
      qkv: pqkv.operand(),
      z: pz.operand(),
      b: pb.operand(),
      a: pa.operand(),
      convWeight: conv.operand(),
      aLog: aLog.operand(),
      dtBias: dtBias.operand(),
      normWeight: norm.operand(),
      convState: state.conv.operand(),
      state: state.recurrent.operand(),
      keyHeads: hk,
      valueHeads: hv,
      keyDim: dk,
      valueDim: dv,
      eps,
    });
    return wrap(backend, handle, 'float32', [s, hv * dv]);
  } finally {
    for (const t of owned) t.dispose();
  }
}

/**
 * parts as views of one storage in one dtype, each with a unit last stride: as given when they already are, else
 * concatenated along dim (float32 when their dtypes differ) and narrowed back; what this makes goes into owned.
 */
function oneStorage(parts: readonly Tensor[], dim: number, owned: Tensor[]): Tensor[] {
  const first = parts[0];
  const unit = (t: Tensor) => t.strides[t.ndim - 1] === 1 || t.shape[t.ndim - 1] <= 1;
  if (parts.every((t) => t.storage === first.storage && t.dtype === first.dtype && unit(t))) return [...parts];
  const dtype = parts.every((t) => t.dtype === first.dtype) ? first.dtype : 'float32';
  const packed = tidy(() =>
    cat(
      parts.map((t) => (t.dtype === dtype ? t : cast(t, dtype))),
      dim,
    ),
  );
  owned.push(packed);
  let at = 0;
  return parts.map((t) => {
    const view = narrow(packed, dim, at, t.shape[dim]);
    at += t.shape[dim];
    owned.push(view);
    return view;
  });
}
