// Decode measurement shared by `tensorgpu bench` and `npm run bench`: prefill a prompt of random ids, then greedy
// decode steps exactly as generate() runs them (a DecodeSession: forward, GPU sampling, one 4-byte read per
// token), captured and replayed or eager, with the host time spent enqueueing each step.
import { Generator } from '../core/random.js';
import type { CausalLM } from '../models/causal-lm.js';
import { gpuCounters, memoryStats, resetPeakMemory, synchronize } from '../runtime/stats.js';
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
  /** The most dispatches a layer of each kind took (hybrid models: linear_attention, full_attention). */
  dispatchesPerLayerKind?: Readonly<Record<string, number>>;
  readsPerToken: number;
  /**
   * Host µs per decode step spent enqueueing it (JS and Dawn, up to and including the submit), excluding the wait
   * for the GPU: the median over the steps, as a software adapter's worker threads compete for the same cores.
   */
  hostMicrosPerToken: number;
  /**
   * The least host µs of one step. Every replayed step does the same host work (two scalar writes, the replay's
   * encoding, one submit, one read), so on a loaded machine the spread above this is the thread being preempted,
   * not work: compare captured rows by this figure.
   */
  hostMicrosPerTokenMin: number;
  /** How the steps ran: 'replay' (captured) or 'eager'. */
  mode: DecodeSessionStats['mode'];
  /** Peak live GPU bytes during the run (weights included). */
  peakGpuBytes: number;
}

/** Prefill, one untimed decode step (it records the captured step), then `decodeSteps` timed steps. */
export async function measureDecode(
  model: CausalLM,
  options: { promptTokens: number; decodeSteps: number; seed?: number; capture?: boolean },
): Promise<DecodeMeasurement> {
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
    const perKind = model.lastForward.byKind;
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
      dispatchesPerLayerKind: perKind,
      readsPerToken: (after.reads - before.reads) / n,
      hostMicrosPerToken: median(host) * 1000,
      hostMicrosPerTokenMin: host.length ? Math.min(...host) * 1000 : 0,
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

/** Dispatches per layer as text: "9.0/layer", or for a hybrid model each kind's most ("8/layer linear_attention, 9/layer full_attention"). */
export function layerDispatchesText(r: Pick<DecodeMeasurement, 'dispatchesPerLayer' | 'dispatchesPerLayerKind'>): string {
  const kinds = Object.entries(r.dispatchesPerLayerKind ?? {});
  return kinds.length < 2 ? `${r.dispatchesPerLayer.toFixed(1)}/layer` : kinds.map(([k, n]) => `${n}/layer ${k}`).join(', ');
}
