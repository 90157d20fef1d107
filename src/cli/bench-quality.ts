// `tensorgpu bench --quality`: what quantizing the weights costs in the model's predictions. The same checkpoint is
// loaded as bf16 (the reference), FP8 (128x128 blocks) and int4 (affine, groups of --group-size along K); each runs
// a fixed text in one prefill, and the figure is the mean over its positions of KL(p_bf16 || p_quantized) of the
// next-token distributions (nats), computed in float64 on the host. A quality figure to report, not a test. The
// same figure for the KV cache's dtype (kvCacheQuality): float32, bfloat16, float16 and FP8 keys and values.
import { Checkpoint } from '../formats/checkpoint.js';
import { int4WeightShape } from '../formats/int4.js';
import type { DeviceName } from '../runtime/backend.js';
import { tensor } from '../ops/creation.js';
import type { CausalLM, PagedCausalLM } from '../models/causal-lm.js';
import type { DType } from '../core/dtype.js';
import { loadModel } from '../models/load.js';
import { tensorBytes } from '../models/causal-lm.js';

/** The fixed text of the quality figure (a public-domain opening line and a plain technical sentence). */
export const QUALITY_TEXT =
  'It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness. ' +
  'A GPU runs thousands of threads at once, so a kernel that reads each weight once is bound by memory bandwidth.';

/**
 * Parameters of a checkpoint from its headers: every tensor's elements, a packed 4-bit weight as its [N, K] (its
 * scales, zero points and g_idx are not parameters), FP8 scale tensors left out.
 */
export async function checkpointParameters(dir: string): Promise<number> {
  await using ck = await Checkpoint.open(dir);
  let total = 0;
  for (const name of ck.names) {
    const packed = /^(.*)\.(qweight|weight_packed)$/.exec(name);
    if (packed) {
      const nk = int4WeightShape(ck, packed[1]);
      total += nk ? nk[0] * nk[1] : 0;
      continue;
    }
    if (/\.(qzeros|scales|g_idx|weight_scale|weight_zero_point|weight_shape|weight_scale_inv)$/.test(name)) continue;
    total += ck.entry(name).shape.reduce((a, b) => a * b, 1);
  }
  return total;
}

/** Bytes of every weight tensor the model holds on its device (scales and zero points included). */
export function modelWeightBytes(model: CausalLM): number {
  return model.weightTensors().reduce((a, t) => a + tensorBytes(t), 0);
}

/** log-softmax of each row of [S, V] float32 logits, in float64. */
function logSoftmax(logits: Float32Array, rows: number): Float64Array[] {
  const v = logits.length / rows;
  const out: Float64Array[] = [];
  for (let r = 0; r < rows; r++) {
    const row = logits.subarray(r * v, (r + 1) * v);
    let max = -Infinity;
    for (const x of row) max = Math.max(max, x);
    let sum = 0;
    for (const x of row) sum += Math.exp(x - max);
    const lse = max + Math.log(sum);
    out.push(Float64Array.from(row, (x) => x - lse));
  }
  return out;
}

/** Every position's next-token log-probabilities for `tokens` run in one prefill. */
async function nextTokenLogProbs(model: CausalLM, tokens: readonly number[]): Promise<Float64Array[]> {
  const cache = model.newCache();
  const input = tensor(Int32Array.from(tokens), { dtype: 'int32', device: model.device });
  try {
    const logits = await model.forward(input, cache, { lastOnly: false });
    const values = (await logits.toArray()) as Float32Array;
    logits.dispose();
    return logSoftmax(values, tokens.length);
  } finally {
    input.dispose();
  }
}

/** Mean over positions of KL(p || q) = sum p (log p - log q), in nats. */
export function meanKl(p: readonly Float64Array[], q: readonly Float64Array[]): number {
  let total = 0;
  for (let r = 0; r < p.length; r++) {
    let kl = 0;
    for (let i = 0; i < p[r].length; i++) kl += Math.exp(p[r][i]) * (p[r][i] - q[r][i]);
    total += kl;
  }
  return total / Math.max(1, p.length);
}

export interface QualityRow {
  readonly dtype: 'bfloat16' | 'fp8' | 'int4';
  /** Weight bytes on the device / checkpoint parameters. */
  readonly bytesPerParameter: number;
  /** The least a decode step reads (CausalLM.activeWeightBytes). */
  readonly activeBytesPerToken: number;
  /** Mean KL(bf16 || this) of the next-token distributions over the fixed text; 0 for bf16. */
  readonly meanKl: number;
}

/**
 * The quality figure of `dir`'s model: bf16, FP8 and int4 weights on `device` over `tokens` (the tokenized
 * QUALITY_TEXT). Loads the model three times, one at a time.
 */
export async function quantizationQuality(dir: string, device: DeviceName, tokens: readonly number[], groupSize?: number): Promise<QualityRow[]> {
  const params = await checkpointParameters(dir);
  const rows: QualityRow[] = [];
  let reference: Float64Array[] | undefined;
  for (const dtype of ['bfloat16', 'fp8', 'int4'] as const) {
    const { model } = await loadModel(dir, { device, dtype, groupSize, maxSequence: tokens.length + 8 });
    try {
      const lp = await nextTokenLogProbs(model, tokens);
      reference ??= lp;
      rows.push({
        dtype,
        bytesPerParameter: modelWeightBytes(model) / params,
        activeBytesPerToken: model.activeWeightBytes(),
        meanKl: meanKl(reference, lp),
      });
    } finally {
      model.dispose();
    }
  }
  return rows;
}

export interface KvQualityRow {
  readonly kvDtype: DType;
  /** KV bytes one position takes in every layer (PagedCausalLM.kvBytesPerPosition; FP8 with its row scales). */
  readonly bytesPerPosition: number;
  /** Mean KL(float32 KV || this) and KL(bfloat16 KV || this) of the next-token distributions over the fixed text. */
  readonly meanKlVsFloat32: number;
  readonly meanKlVsBfloat16: number;
}

/**
 * What the KV cache's dtype costs in the predictions: the same weights (as `dtype` loads them) with a float32,
 * bfloat16, float16 and FP8 (core/kv-fp8.ts) KV cache, each over `tokens` in one prefill, whose attention reads
 * the keys and values back from the cache as written. Loads the model four times, one at a time.
 */
export async function kvCacheQuality(dir: string, device: DeviceName, tokens: readonly number[], dtype?: 'fp8' | 'int4' | DType): Promise<KvQualityRow[]> {
  const logProbs = new Map<DType, Float64Array[]>();
  const bytes = new Map<DType, number>();
  const kinds = ['float32', 'bfloat16', 'float16', 'float8_e4m3fn'] as const;
  for (const kvDtype of kinds) {
    const { model } = await loadModel(dir, { device, dtype, kvDtype, maxSequence: tokens.length + 8 });
    try {
      logProbs.set(kvDtype, await nextTokenLogProbs(model, tokens));
      const kv = (model as Partial<PagedCausalLM>).kvBytesPerPosition?.();
      if (kv !== undefined) bytes.set(kvDtype, kv);
    } finally {
      model.dispose();
    }
  }
  return kinds.map((kvDtype) => ({
    kvDtype,
    bytesPerPosition: bytes.get(kvDtype) ?? NaN,
    meanKlVsFloat32: meanKl(logProbs.get('float32')!, logProbs.get(kvDtype)!),
    meanKlVsBfloat16: meanKl(logProbs.get('bfloat16')!, logProbs.get(kvDtype)!),
  }));
}
