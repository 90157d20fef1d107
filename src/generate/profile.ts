// `tensorgpu bench --profile`: GPU time per kernel family over captured decode steps, from timestamp queries, as a
// table (kernel, dispatches per token, µs per token, share), plus the bandwidth of the kernels that read weights.
import type { KernelTime } from '../backends/webgpu/profiler.js';
import type { CausalLM } from '../models/causal-lm.js';
import { resetProfile, startProfiling, stopProfiling } from '../runtime-stats.js';
import { DecodeSession } from './decode-session.js';

export interface DecodeProfile {
  decodeSteps: number;
  kernels: KernelTime[];
  /** Active weight bytes per token over the GPU time of the weight-reading kernels (GEMV, expert GEMV, GEMM). */
  weightGBs: number | null;
}

/** Kernel families whose time is mostly reading weights. */
const WEIGHT_KERNELS = new Set(['gemv', 'expert-linear', 'gemm', 'expert-gemm']);

export async function profileDecode(model: CausalLM, options: { promptTokens: number; decodeSteps: number }): Promise<DecodeProfile> {
  const session = new DecodeSession(model, { sampling: { temperature: 0 } });
  startProfiling();
  try {
    await session.prefill(Array.from({ length: options.promptTokens }, (_, i) => (i * 7919) % model.config.vocabSize), 0);
    await session.next(0); // records the step
    await resetProfile();
    for (let i = 0; i < options.decodeSteps; i++) await session.next(0);
  } finally {
    session.dispose();
  }
  const kernels = await stopProfiling();
  const weightMicros = kernels.filter((k) => WEIGHT_KERNELS.has(k.kernel)).reduce((a, k) => a + k.totalMicros, 0);
  const perToken = weightMicros / Math.max(1, options.decodeSteps);
  return { decodeSteps: options.decodeSteps, kernels, weightGBs: perToken > 0 ? model.activeWeightBytes() / (perToken * 1e3) : null };
}

export function formatProfile(p: DecodeProfile): string[] {
  const total = p.kernels.reduce((a, k) => a + k.totalMicros, 0);
  const n = Math.max(1, p.decodeSteps);
  const rows = p.kernels.map((k) => [k.kernel, (k.dispatches / n).toFixed(1), (k.totalMicros / n).toFixed(1), `${((100 * k.totalMicros) / Math.max(total, 1e-9)).toFixed(1)}%`]);
  rows.push(['total', (p.kernels.reduce((a, k) => a + k.dispatches, 0) / n).toFixed(1), (total / n).toFixed(1), '100%']);
  const header = ['kernel', 'dispatches/token', 'GPU µs/token', 'share'];
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c].length)));
  const line = (r: string[]) => r.map((x, c) => (c === 0 ? x.padEnd(widths[c]) : x.padStart(widths[c]))).join('  ');
  const out = [`GPU time per kernel family over ${p.decodeSteps} captured decode steps (timestamp queries, one pass per dispatch):`, line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)];
  if (p.weightGBs !== null) out.push(`weight-reading kernels (${[...WEIGHT_KERNELS].join(', ')}): ${p.weightGBs >= 100 ? p.weightGBs.toFixed(0) : p.weightGBs.toPrecision(3)} GB/s of active weights`);
  return out;
}
