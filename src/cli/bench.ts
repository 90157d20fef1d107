// `tensorgpu bench`: prefill and decode throughput of a Qwen3 / Qwen3-MoE checkpoint (default: the built-in
// model), dispatches and reads per token, the weight bytes a token must read and the bandwidth that implies, peak
// GPU memory; for MoE models, the fused MoE block against a per-expert loop on the same weights.
import { releaseDevice, type DeviceRequest } from '../backends/registry.js';
import { activeWeightBytes, measureDecode, type DecodeMeasurement } from '../generate/measure.js';
import type { MoeMode } from '../models/qwen3/model.js';
import { disposeWeights } from '../models/qwen3/weights.js';
import { openModel } from './model-source.js';
import { formatBytes } from './progress.js';

export interface BenchCliOptions {
  model?: string;
  device: DeviceRequest;
  dtype?: 'fp8' | 'float32' | 'float16' | 'bfloat16';
  promptTokens: number;
  decodeTokens: number;
  /** Which MoE implementations to measure (default both for MoE models). */
  moe?: MoeMode | 'both';
  json?: boolean;
}

export async function runBench(o: BenchCliOptions, out: (line: string) => void = (l) => process.stdout.write(l + '\n'), log: (line: string) => void = (l) => process.stderr.write(l + '\n')): Promise<number> {
  try {
    const { loaded, device, dir, loadMs } = await openModel({ ...o, log, maxSequence: o.promptTokens + o.decodeTokens + 8 });
    const { model, config } = loaded;
    try {
      const modes: MoeMode[] = !config.moe ? ['fused'] : o.moe === 'both' || o.moe === undefined ? ['fused', 'per-expert'] : [o.moe];
      const active = activeWeightBytes(model);
      const results: Record<string, DecodeMeasurement> = {};
      for (const mode of modes) {
        model.moeMode = mode;
        // One short warm-up run compiles every pipeline outside the timing.
        await measureDecode(model, { promptTokens: Math.min(4, o.promptTokens), decodeSteps: 2 });
        log(`measuring ${mode === 'fused' ? 'fused MoE' : 'per-expert MoE loop'}...`);
        results[mode] = await measureDecode(model, { promptTokens: o.promptTokens, decodeSteps: o.decodeTokens });
      }
      if (o.json) {
        out(JSON.stringify({ model: dir, device, config: config.modelType, dtype: o.dtype ?? 'as stored', loadMs, activeWeightBytes: active, results }, null, 2));
        return 0;
      }
      out(`model: ${dir} (${config.modelType}, ${config.numHiddenLayers} layers${config.moe ? `, ${config.moe.numExperts} experts, top ${config.moe.numExpertsPerTok}` : ''}) on ${device}, weights ${o.dtype ?? 'as stored'}, loaded in ${(loadMs / 1000).toFixed(1)} s`);
      out(`weight bytes a decode step must read (active weights once): ${formatBytes(active)}`);
      for (const [mode, r] of Object.entries(results)) {
        out(
          `${mode.padEnd(10)} prefill ${r.promptTokens} tokens: ${((r.promptTokens / r.prefillMs) * 1000).toFixed(1)} tok/s | decode ${r.decodeSteps} tokens: ${r.decodeTokensPerSecond.toFixed(2)} tok/s, ` +
            `${r.dispatchesPerToken.toFixed(0)} dispatches/token, ${r.readsPerToken.toFixed(0)} reads/token, ${((active * r.decodeTokensPerSecond) / 1e9).toFixed(2)} GB/s of active weights, peak GPU ${formatBytes(r.peakGpuBytes)}`,
        );
      }
      if (results.fused && results['per-expert']) {
        const f = results.fused;
        const p = results['per-expert'];
        out(`fused vs per-expert: ${(f.decodeTokensPerSecond / p.decodeTokensPerSecond).toFixed(2)}x decode tok/s, ${p.dispatchesPerToken.toFixed(0)} -> ${f.dispatchesPerToken.toFixed(0)} dispatches/token`);
      }
      return 0;
    } finally {
      model.dispose();
      disposeWeights(model.weights);
    }
  } finally {
    releaseDevice();
  }
}
