// Decode throughput measurement shared by `tensorgpu bench` and `npm run bench`: prefill a prompt of random ids,
// then greedy decode steps exactly as generate() runs them (forward, GPU sampling, one 4-byte read per token).
import { DTYPE_INFO } from '../core/dtype.js';
import { Generator } from '../core/random.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from '../ops/creation.js';
import { sampleToken } from '../ops/sample.js';
import type { Qwen3Model } from '../models/qwen3/model.js';
import { weightTensors } from '../models/qwen3/weights.js';
import { gpuCounters, memoryStats, resetPeakMemory, synchronize } from '../runtime-stats.js';

export interface DecodeMeasurement {
  promptTokens: number;
  prefillMs: number;
  decodeSteps: number;
  decodeMs: number;
  decodeTokensPerSecond: number;
  dispatchesPerToken: number;
  readsPerToken: number;
  /** Peak live GPU bytes during the run (weights included). */
  peakGpuBytes: number;
}

const bytesOf = (t: Tensor) => t.numel * DTYPE_INFO[t.dtype].itemBytes;

/**
 * The least a decode step must read: every weight once, but only topK of E experts per MoE layer and one row of
 * the embedding (KV cache and activations excluded: they grow with the context and are small here).
 */
export function activeWeightBytes(model: Qwen3Model): number {
  const w = model.weights;
  let total = 0;
  for (const t of weightTensors(w)) total += bytesOf(t);
  total -= bytesOf(w.embedTokens) - bytesOf(w.embedTokens) / w.embedTokens.shape[0];
  if (w.lmHead.data === w.embedTokens) total += bytesOf(w.embedTokens) - bytesOf(w.embedTokens) / w.embedTokens.shape[0];
  const moe = model.config.moe;
  for (const l of w.layers) {
    if (l.mlp.kind !== 'moe' || !moe) continue;
    for (const x of [l.mlp.gateUp, l.mlp.down]) {
      for (const t of [x.data, ...(x.scale ? [x.scale] : [])]) total -= bytesOf(t) * (1 - moe.numExpertsPerTok / moe.numExperts);
    }
  }
  return total;
}

export async function measureDecode(model: Qwen3Model, options: { promptTokens: number; decodeSteps: number; seed?: number }): Promise<DecodeMeasurement> {
  const g = new Generator(options.seed ?? 7);
  const ids = Array.from({ length: options.promptTokens }, () => g.nextU32() % model.config.vocabSize);
  const cache = model.newCache();
  let input: Tensor = tensor(ids, { dtype: 'int32', device: model.device });
  try {
    await synchronize();
    resetPeakMemory();
    const t0 = performance.now();
    const step = async () => {
      const logits = await model.forward(input, cache);
      const next = sampleToken(logits, { temperature: 0 });
      logits.dispose();
      input.dispose();
      input = next;
      return (await next.toArray())[0];
    };
    await step();
    const prefillMs = performance.now() - t0;
    const before = gpuCounters();
    const t1 = performance.now();
    for (let i = 0; i < options.decodeSteps; i++) await step();
    const decodeMs = performance.now() - t1;
    const after = gpuCounters();
    const n = Math.max(1, options.decodeSteps);
    return {
      promptTokens: options.promptTokens,
      prefillMs,
      decodeSteps: options.decodeSteps,
      decodeMs,
      decodeTokensPerSecond: (options.decodeSteps / decodeMs) * 1000,
      dispatchesPerToken: (after.dispatches - before.dispatches) / n,
      readsPerToken: (after.reads - before.reads) / n,
      peakGpuBytes: memoryStats().peakLiveBytes,
    };
  } finally {
    input.dispose();
    cache.dispose();
  }
}
