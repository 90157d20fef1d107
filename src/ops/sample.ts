// Token sampling with the logits kept on the device: one dispatch, one 4-byte read (sample) or none (sampleToken).
import { runKernel } from '../kernels/registry.js';
import type { SamplingParams } from '../runtime/backend.js';
import { DTypeError, ShapeError, TensorGpuError } from '../core/errors.js';
import { defaultGenerator, Generator } from '../core/random.js';
import { unreplayable } from '../compile/trace.js';
import { formatShape } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from './creation.js';
import { compact } from './shape-ops.js';
import { commonBackend, requireDeviceScalar, requireDTypes, wrap } from './util.js';

export interface SampleOptions {
  /** Divides the logits; 0 = greedy (argmax). Default 1. */
  temperature?: number;
  /** Keep the k most likely tokens (ties at the k-th value are all kept); 0 = off. */
  topK?: number;
  /** Keep the smallest most-likely set holding at least this probability (nucleus); 1 = off. */
  topP?: number;
  /** Keep tokens whose probability is at least minP times the top one's; 0 = off. */
  minP?: number;
  /** Seed for this draw (deterministic); otherwise `generator`, or the default generator (manualSeed). */
  seed?: number;
  generator?: Generator;
  /** HF repetition penalty (> 1 discourages): positive logits of previous tokens divided, negative multiplied. */
  repetitionPenalty?: number;
  /** Subtracted once from the logit of every previous token. */
  presencePenalty?: number;
  /** Subtracted from a previous token's logit per occurrence. */
  frequencyPenalty?: number;
  /** Token ids the penalties apply to (a JS array or an int32 tensor on the logits' device). */
  previousTokens?: readonly number[] | Tensor;
  /**
   * A float32 [1] tensor on the logits' device holding the uniform draw in [0, 1), read by the kernel in place of
   * seed / generator (a captured decode step rewrites it each step).
   */
  draw?: Tensor;
  /**
   * A token bitmask (constrained decoding: a grammar's allowed next tokens), int32 [ceil(V / 32)] on the logits'
   * device: token i may be sampled only when bit i % 32 of word i / 32 is set. Applied inside the sampler (masked
   * logits become -Inf first), so it adds no read back; a captured step rewrites it in place each step.
   */
  mask?: Tensor;
}

/** The mask as the sampler reads it: a contiguous int32 of `words` words per row on the logits' device. */
function maskOperand(op: string, logits: Tensor, mask: Tensor, rows: number, vocab: number): Tensor {
  commonBackend(op, logits, mask);
  const words = Math.ceil(vocab / 32);
  if (mask.dtype !== 'int32' || mask.numel !== rows * words)
    throw new ShapeError(`${op}: mask must be int32 with ${rows} x ${words} words (ceil(${vocab} / 32) per row), got ${mask.describe()}`);
  // A contiguous view is read in place at its offset (a captured step's mask, rewritten each step).
  return mask.isContiguous() ? mask : compact(mask);
}

function check(cond: boolean, message: string): void {
  if (!cond) throw new RangeError(`sample: ${message}`);
}

function resolveParams(o: SampleOptions, vocab: number): SamplingParams {
  const temperature = o.temperature ?? 1;
  const topK = o.topK ?? 0;
  const topP = o.topP ?? 1;
  const minP = o.minP ?? 0;
  const repetition = o.repetitionPenalty ?? 1;
  check(Number.isFinite(temperature) && temperature >= 0, `temperature must be >= 0, got ${temperature}`);
  check(Number.isInteger(topK) && topK >= 0, `topK must be a non-negative integer, got ${topK}`);
  check(topP > 0 && topP <= 1, `topP must be in (0, 1], got ${topP}`);
  check(minP >= 0 && minP <= 1, `minP must be in [0, 1], got ${minP}`);
  check(Number.isFinite(repetition) && repetition > 0, `repetitionPenalty must be > 0, got ${repetition}`);
  if (!o.draw && o.seed === undefined && temperature !== 0)
    unreplayable('it samples with a random number drawn on the host: pass `draw` (a device scalar) or a seed');
  return {
    invTemperature: temperature === 0 ? 0 : Math.fround(1 / temperature),
    topK: Math.min(topK, vocab),
    topP: Math.fround(topP),
    minP: Math.fround(minP),
    u: o.draw ? 0 : samplingDraw(o),
    repetition: Math.fround(repetition),
    invRepetition: Math.fround(1 / repetition),
    presence: Math.fround(o.presencePenalty ?? 0),
    frequency: Math.fround(o.frequencyPenalty ?? 0),
  };
}

/** The uniform draw a sample with these options would use (seed, else generator, else the default generator). */
export function samplingDraw(options: Pick<SampleOptions, 'seed' | 'generator'>): number {
  const g = options.seed !== undefined ? new Generator(options.seed) : (options.generator ?? defaultGenerator);
  return g.uniform();
}

/**
 * Samples a token id from a [V] or [1, V] logits row without reading the logits back: returns an int32 tensor of
 * shape [1] on the logits' device (-1 when every logit is -Inf or NaN). Feed it to the next step as is.
 */
export function sampleToken(logits: Tensor, options: SampleOptions = {}): Tensor {
  const backend = commonBackend('sample', logits);
  requireDTypes('sample', logits, ['float32', 'float16', 'bfloat16']);
  const vocab = logits.shape[logits.ndim - 1] ?? 0;
  if (!(logits.ndim === 1 || (logits.ndim === 2 && logits.shape[0] === 1)) || vocab === 0) {
    throw new ShapeError(`sample: logits must be one non-empty row, [V] or [1, V]; got ${formatShape(logits.shape)}`);
  }
  const params = resolveParams(options, vocab);
  const prevOpt = options.previousTokens;
  const prev =
    prevOpt === undefined ? undefined : Array.isArray(prevOpt) ? tensor([...prevOpt], { dtype: 'int32', device: logits.device }) : compact(prevOpt as Tensor);
  let mask: Tensor | undefined;
  try {
    mask = options.mask && maskOperand('sample', logits, options.mask, 1, vocab);
    if (prev && prev.dtype !== 'int32') throw new DTypeError(`sample: previousTokens must be int32, got ${prev.describe()}`);
    if (prev) commonBackend('sample', logits, prev);
    const draw = options.draw;
    if (draw) {
      commonBackend('sample', logits, draw);
      requireDeviceScalar('sample', 'draw', draw, 'float32');
    }
    const handle = runKernel('sample', backend, {
      logits: logits.operand(),
      previous: prev && prev.numel > 0 ? prev.operand() : undefined,
      params,
      drawFrom: draw?.operand(),
      mask: mask?.operand(),
    });
    return wrap(backend, handle, 'int32', [1]);
  } finally {
    prev?.dispose();
    if (mask !== options.mask) mask?.dispose();
  }
}

/** Samples a token id (sampleToken plus one 4-byte read). Greedy and topK=1 give exactly the CPU backend's argmax. */
export async function sample(logits: Tensor, options: SampleOptions = {}): Promise<number> {
  const t = sampleToken(logits, options);
  try {
    const id = (await t.toArray())[0];
    if (id < 0) throw new TensorGpuError(`sample: every logit of ${logits.describe()} is -Inf or NaN; nothing can be sampled`);
    return id;
  } finally {
    t.dispose();
  }
}

/** One row's sampling in `sampleRows`: SampleOptions less the draw tensor, previous tokens as numbers. */
export type RowSampling = Omit<SampleOptions, 'draw' | 'previousTokens' | 'mask'> & { previousTokens?: readonly number[] };

/**
 * One token id per row of [B, V] logits, row r sampled with rows[r] (its own temperature, top-k/p, min-p,
 * penalties, seed): an int32 [B] tensor on the logits' device, -1 for a row with nothing samplable. The ids equal
 * `sampleToken` row by row; on WebGPU the whole batch is one dispatch (one workgroup per row). `draws` (float32
 * [B] on the device), when given, supplies every row's uniform draw instead of its seed / generator. `masks`
 * (int32 [B, ceil(V / 32)] on the device), when given, holds each row's token bitmask (see SampleOptions.mask; a
 * row without a grammar sets every bit: allowAllMask).
 */
export function sampleRows(logits: Tensor, rows: readonly RowSampling[], options: { draws?: Tensor; masks?: Tensor } = {}): Tensor {
  const backend = commonBackend('sampleRows', logits);
  requireDTypes('sampleRows', logits, ['float32', 'float16', 'bfloat16']);
  const [b, vocab] = logits.shape;
  if (logits.ndim !== 2 || vocab === 0) throw new ShapeError(`sampleRows: logits must be [B, V] with V > 0; got ${formatShape(logits.shape)}`);
  if (rows.length !== b) throw new ShapeError(`sampleRows: ${rows.length} row settings for ${b} rows of logits ${formatShape(logits.shape)}`);
  if (b! > 65535) throw new ShapeError(`sampleRows: at most 65535 rows, got ${b}`);
  const draws = options.draws;
  if (draws) {
    commonBackend('sampleRows', logits, draws);
    if (draws.dtype !== 'float32' || draws.ndim !== 1 || draws.shape[0] !== b)
      throw new ShapeError(`sampleRows: draws must be float32 [${b}], got ${draws.describe()}`);
  }
  const params = rows.map((r) => resolveParams(draws ? { ...r, draw: draws } : r, vocab!));
  const spans: [number, number][] = [];
  const prevIds: number[] = [];
  for (const r of rows) {
    spans.push([prevIds.length, r.previousTokens?.length ?? 0]);
    for (const id of r.previousTokens ?? []) prevIds.push(id);
  }
  const prev = prevIds.length > 0 ? tensor(prevIds, { dtype: 'int32', device: logits.device }) : undefined;
  const drawsView = draws && compact(draws);
  const masks = options.masks && maskOperand('sampleRows', logits, options.masks, b!, vocab!);
  try {
    const handle = runKernel('sampleRows', backend, {
      logits: logits.operand(),
      params,
      previous: prev?.operand(),
      spans,
      draws: drawsView?.operand(),
      mask: masks?.operand(),
    });
    return wrap(backend, handle, 'int32', [b!]);
  } finally {
    prev?.dispose();
    drawsView?.dispose();
    if (masks !== options.masks) masks?.dispose();
  }
}
