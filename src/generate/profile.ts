// `tensorgpu bench --profile`: GPU time per kernel family over captured decode steps, from timestamp queries, as a
// table (kernel, dispatches per token, µs per token, share, MB moved per token and GB/s where the launcher counts its
// bytes, and the share of the adapter's datasheet bandwidth where the GPU is one we know), plus the bandwidth of the
// kernels that read weights.
import { webgpuBackend } from '../runtime/registry.js';
import { peakBandwidth, type PeakBandwidth } from '../runtime/webgpu/peak-bandwidth.js';
import type { KernelTime } from '../runtime/webgpu/profiler.js';
import type { CausalLM } from '../models/causal-lm.js';
import { resetProfile, startProfiling, stopProfiling } from '../runtime/stats.js';
import { DecodeSession } from './decode-session.js';

export interface DecodeProfile {
  decodeSteps: number;
  kernels: KernelTime[];
  /** Active weight bytes per token over the GPU time of the weight-reading kernels (GEMV, expert GEMV, GEMM). */
  weightGBs: number | null;
  /** The adapter's datasheet bandwidth, when its description names a GPU we know. */
  peak: PeakBandwidth | null;
}

/** Kernel families whose time is mostly reading weights. */
const WEIGHT_KERNELS = new Set(['gemv', 'expert-linear', 'gemm', 'expert-gemm']);

export async function profileDecode(model: CausalLM, options: { promptTokens: number; decodeSteps: number }): Promise<DecodeProfile> {
  const session = new DecodeSession(model, { sampling: { temperature: 0 } });
  startProfiling();
  try {
    await session.prefill(
      Array.from({ length: options.promptTokens }, (_, i) => (i * 7919) % model.config.vocabSize),
      0,
    );
    await session.next(0); // records the step
    await resetProfile();
    for (let i = 0; i < options.decodeSteps; i++) await session.next(0);
  } finally {
    session.dispose();
  }
  const kernels = await stopProfiling();
  const weightMicros = kernels.filter((k) => WEIGHT_KERNELS.has(k.kernel)).reduce((a, k) => a + k.totalMicros, 0);
  const perToken = weightMicros / Math.max(1, options.decodeSteps);
  const adapter = webgpuBackend()?.adapter;
  return {
    decodeSteps: options.decodeSteps,
    kernels,
    weightGBs: perToken > 0 ? model.activeWeightBytes() / (perToken * 1e3) : null,
    peak: adapter ? peakBandwidth(adapter) : null,
  };
}

/** GB/s of a kernel family (bytes over its GPU time), or null when its launcher does not count bytes. */
export function kernelGBs(k: KernelTime): number | null {
  return k.bytes !== undefined && k.totalMicros > 0 ? k.bytes / (k.totalMicros * 1e3) : null;
}

/** GB/s with three significant digits (a software adapter's figures are tiny). */
export function gbs(x: number): string {
  return x >= 100 ? x.toFixed(0) : x.toPrecision(3);
}

export function formatProfile(p: DecodeProfile): string[] {
  const ofPeak = (g: number) => `${((100 * g) / p.peak!.gbs).toFixed(1)}%`;
  const total = p.kernels.reduce((a, k) => a + k.totalMicros, 0);
  const n = Math.max(1, p.decodeSteps);
  const rows = p.kernels.map((k) => {
    const g = kernelGBs(k);
    const row = [k.kernel, (k.dispatches / n).toFixed(1), (k.totalMicros / n).toFixed(1), `${((100 * k.totalMicros) / Math.max(total, 1e-9)).toFixed(1)}%`];
    row.push(k.bytes === undefined ? '-' : (k.bytes / n / 1e6).toPrecision(3), g === null ? '-' : gbs(g));
    if (p.peak) row.push(g === null ? '-' : ofPeak(g));
    return row;
  });
  const totalRow = ['total', (p.kernels.reduce((a, k) => a + k.dispatches, 0) / n).toFixed(1), (total / n).toFixed(1), '100%', '', ''];
  if (p.peak) totalRow.push('');
  rows.push(totalRow);
  const header = ['kernel', 'dispatches/token', 'GPU µs/token', 'share', 'MB/token', 'GB/s'];
  if (p.peak) header.push(`of ${p.peak.gbs} GB/s`);
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c].length)));
  const line = (r: string[]) =>
    r
      .map((x, c) => (c === 0 ? x.padEnd(widths[c]) : x.padStart(widths[c])))
      .join('  ')
      .trimEnd();
  const out = [
    `GPU time per kernel family over ${p.decodeSteps} captured decode steps (timestamp queries, one pass per dispatch):`,
    line(header),
    widths.map((w) => '-'.repeat(w)).join('  '),
    ...rows.map(line),
  ];
  out.push(
    `MB/token and GB/s: bytes each launcher reads and writes (operands once; '-' where a launcher does not count them)${p.peak ? `; ${p.peak.name} datasheet peak ${p.peak.gbs} GB/s` : '; no datasheet bandwidth known for this adapter'}`,
  );
  if (p.weightGBs !== null)
    out.push(
      `weight-reading kernels (${[...WEIGHT_KERNELS].join(', ')}): ${gbs(p.weightGBs)} GB/s of active weights${p.peak ? ` (${ofPeak(p.weightGBs)} of peak)` : ''}`,
    );
  return out;
}
