// Decode measurement shared by `tensorgpu bench` and `npm run bench`: prefill a prompt of random ids, then greedy
// decode steps exactly as generate() runs them (a DecodeSession: forward, GPU sampling, one 4-byte read per
// token), captured and replayed or eager, with the host time spent enqueueing each step.
import { DTYPE_INFO } from '../core/dtype.js';
import { Generator } from '../core/random.js';
import type { Tensor } from '../core/tensor.js';
import type { Qwen3Model } from '../models/qwen3/model.js';
import { weightTensors } from '../models/qwen3/weights.js';
import { gpuCounters, memoryStats, resetPeakMemory, synchronize } from '../runtime-stats.js';
import { DecodeSession, type DecodeSessionStats } from './decode-session.js';

export interface DecodeMeasurement {
  promptTokens: number;
  prefillMs: number;
  decodeSteps: number;
  decodeMs: number;
  decodeTokensPerSecond: number;
  dispatchesPerToken: number;
  /** Dispatches of one decoder layer per token (the fused forward's count; the per-expert loop's varies). */
  dispatchesPerLayer: number;
  readsPerToken: number;
  /**
   * Host µs per decode step spent enqueueing it (JS and Dawn, up to and including the submit), excluding the wait
   * for the GPU: the median over the steps, as a software adapter's worker threads compete for the same cores.
   */
  hostMicrosPerToken: number;
  /** How the steps ran: 'replay' (captured) or 'eager'. */
  mode: DecodeSessionStats['mode'];
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

/** Prefill, one untimed decode step (it records the captured step), then `decodeSteps` timed steps. */
export async function measureDecode(model: Qwen3Model, options: { promptTokens: number; decodeSteps: number; seed?: number; capture?: boolean }): Promise<DecodeMeasurement> {
  const g = new Generator(options.seed ?? 7);
  const ids = Array.from({ length: options.promptTokens }, () => g.nextU32() % model.config.vocabSize);
  const session = new DecodeSession(model, { sampling: { temperature: 0 }, capture: options.capture ?? true });
  try {
    await synchronize();
    resetPeakMemory();
    const t0 = performance.now();
    await session.prefill(ids, 0);
    const prefillMs = performance.now() - t0;
    await session.next(0);
    const perLayer = model.lastForward.perLayer;
    const before = gpuCounters();
    const host: number[] = [];
    const t1 = performance.now();
    for (let i = 0; i < options.decodeSteps; i++) {
      await session.next(0);
      host.push(session.stats.lastHostMs);
    }
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
      dispatchesPerLayer: perLayer,
      readsPerToken: (after.reads - before.reads) / n,
      hostMicrosPerToken: median(host) * 1000,
      mode: session.stats.mode,
      peakGpuBytes: memoryStats().peakLiveBytes,
    };
  } finally {
    session.dispose();
  }
}

/** The median of xs (0 for none): also the bench harness's. */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}
