// `tensorgpu bench`: prefill and decode throughput of a Qwen3 / Qwen3-MoE checkpoint (default: the built-in
// model), dispatches and reads per token, the weight bytes a token must read and the bandwidth that implies, peak
// GPU memory; for MoE models, the fused MoE block against a per-expert loop on the same weights.
import type { DeviceName } from '../runtime/backend.js';
import { releaseDevice, webgpuBackend, type DeviceRequest } from '../runtime/registry.js';
import { measureDispatchFloor } from '../runtime/webgpu/dispatch-floor.js';
import { formatProfile, gbs, profileDecode } from '../generate/profile.js';
import { layerDispatchesText, measureDecode, type DecodeMeasurement } from '../generate/measure.js';
import type { MoeMode } from '../models/causal-lm.js';
import { openModel, type WeightDTypeName } from './model-source.js';
import { formatBytes } from './progress.js';
import {
  checkpointParameters,
  kvCacheQuality,
  modelWeightBytes,
  QUALITY_TEXT,
  quantizationQuality,
  type KvQualityRow,
  type QualityRow,
} from './bench-quality.js';

export interface BenchCliOptions {
  model?: string;
  device: DeviceRequest;
  dtype?: WeightDTypeName;
  /** int4 group size along K (32, 64 or 128; default 128). */
  groupSize?: number;
  promptTokens: number;
  decodeTokens: number;
  /** Which MoE implementations to measure (default both for MoE models). */
  moe?: MoeMode | 'both';
  json?: boolean;
  /** GPU time per kernel family from timestamp queries (WebGPU with timestamp-query). */
  profile?: boolean;
  /** Also the quality figure: mean KL of the next-token distributions of FP8 and int4 weights against bf16. */
  quality?: boolean;
}

export async function runBench(
  o: BenchCliOptions,
  out: (line: string) => void = (l) => process.stdout.write(l + '\n'),
  log: (line: string) => void = (l) => process.stderr.write(l + '\n'),
): Promise<number> {
  try {
    const { loaded, device, dir, loadMs } = await openModel({ ...o, log, maxSequence: o.promptTokens + o.decodeTokens + 8 });
    const { model, config } = loaded;
    try {
      // Captured (the default path), the same fused kernels run eagerly, and for MoE the per-expert loop.
      // Steps are captured only on WebGPU; the CPU runs the fused forward eagerly.
      const runs: { name: string; mode: MoeMode; capture: boolean }[] = [];
      if (o.moe !== 'per-expert' || !config.moe) {
        if (device === 'webgpu') runs.push({ name: 'captured', mode: 'fused', capture: true });
        runs.push({ name: 'eager', mode: 'fused', capture: false });
      }
      if (config.moe && o.moe !== 'fused') runs.push({ name: 'per-expert', mode: 'per-expert', capture: false });
      const active = model.activeWeightBytes();
      // Machine-independent: the weights' bytes per checkpoint parameter (int4: half a byte plus group scales and zeros).
      const parameters = await checkpointParameters(dir);
      const weightBytes = modelWeightBytes(model);
      const results: Record<string, DecodeMeasurement> = {};
      for (const run of runs) {
        model.moeMode = run.mode;
        // One short warm-up run compiles every pipeline outside the timing.
        await measureDecode(model, { promptTokens: Math.min(4, o.promptTokens), decodeSteps: 2, capture: run.capture });
        log(`measuring ${run.name}${run.mode === 'per-expert' ? ' MoE loop' : ''}...`);
        results[run.name] = await measureDecode(model, { promptTokens: o.promptTokens, decodeSteps: o.decodeTokens, capture: run.capture });
      }
      model.moeMode = 'fused';
      const gpu = webgpuBackend();
      const floor = device === 'webgpu' && gpu ? await measureDispatchFloor(gpu.gpuDevice) : undefined;
      const profile =
        o.profile && device === 'webgpu' ? await profileDecode(model, { promptTokens: o.promptTokens, decodeSteps: Math.min(o.decodeTokens, 8) }) : undefined;
      let quality: QualityRow[] | undefined;
      let kvQuality: KvQualityRow[] | undefined;
      if (o.quality) {
        if (!loaded.tokenizer) throw new Error('--quality needs the model folder to have a tokenizer (tokenizer.json)');
        log('measuring the quality figure (bf16, fp8, int4 over a fixed text)...');
        quality = await quantizationQuality(dir, device, loaded.tokenizer.encode(QUALITY_TEXT), o.groupSize);
        log('measuring the KV cache quality figure (float32, bf16, f16, fp8 KV over the same text)...');
        kvQuality = await kvCacheQuality(dir, device, loaded.tokenizer.encode(QUALITY_TEXT), o.dtype);
      }
      if (o.json) {
        out(
          JSON.stringify(
            {
              model: dir,
              device,
              config: config.modelType,
              dtype: o.dtype ?? 'as stored',
              loadMs,
              parameters,
              weightBytes,
              bytesPerParameter: weightBytes / parameters,
              activeWeightBytes: active,
              quality: quality ?? null,
              kvQuality: kvQuality ?? null,
              dispatchFloor: floor ?? null,
              results,
              profile: profile ?? null,
            },
            null,
            2,
          ),
        );
        return 0;
      }
      out(
        `model: ${dir} (${config.modelType}, ${config.numHiddenLayers} layers${config.moe ? `, ${config.moe.numExperts} experts, top ${config.moe.numExpertsPerTok}` : ''}) on ${device}, weights ${o.dtype ?? 'as stored'}, loaded in ${(loadMs / 1000).toFixed(1)} s`,
      );
      out(
        `weights: ${formatBytes(weightBytes)} for ${parameters.toLocaleString('en-US')} parameters, ${(weightBytes / parameters).toFixed(4)} bytes per parameter (scales and zero points included)`,
      );
      out(`weight bytes a decode step must read (active weights once): ${formatBytes(active)}`);
      const memory = cacheBytesText(model);
      if (memory) out(memory);
      for (const [name, r] of Object.entries(results)) out(decodeRowText(name, r, device, active));
      const cap = results.captured;
      const eager = results.eager;
      if (cap && eager && device === 'webgpu') {
        const perDispatch = (r: DecodeMeasurement) => r.hostMicrosPerToken / Math.max(1, r.dispatchesPerToken);
        out(
          `host per token: captured ${cap.hostMicrosPerToken.toFixed(0)} µs vs eager ${eager.hostMicrosPerToken.toFixed(0)} µs (${hostWorkRatio(cap.hostMicrosPerToken, eager.hostMicrosPerToken)})`,
        );
        if (floor) {
          out(
            `host per dispatch (a step's host time / its dispatches, state writes and submit included): replay ${perDispatch(cap).toFixed(1)} µs, eager ${perDispatch(eager).toFixed(1)} µs; raw Dawn floor ${floor.prebuiltMicros.toFixed(1)} µs (prebuilt bind groups over distinct buffers), ${floor.freshMicros.toFixed(1)} µs (new bind group + uniform write): ` +
              `replay is ${(perDispatch(cap) / floor.prebuiltMicros).toFixed(1)}x the floor`,
          );
        }
      }
      const fused = results.captured ?? results.eager;
      if (fused && results['per-expert']) {
        const p = results['per-expert'];
        const dispatches = device === 'webgpu' ? `, ${p.dispatchesPerToken.toFixed(0)} -> ${fused.dispatchesPerToken.toFixed(0)} dispatches/token` : '';
        out(
          `fused (${results.captured ? 'captured' : 'eager'}) vs per-expert: ${(fused.decodeTokensPerSecond / p.decodeTokensPerSecond).toFixed(2)}x decode tok/s${dispatches}`,
        );
      }
      if (profile) for (const line of formatProfile(profile)) out(line);
      if (quality) {
        const tokens = loaded.tokenizer!.encode(QUALITY_TEXT).length;
        out(`quality over a fixed text (${tokens} tokens, mean KL(bf16 || dtype) of the next-token distributions):`);
        for (const q of quality) {
          out(
            `  ${q.dtype.padEnd(8)} ${q.bytesPerParameter.toFixed(4)} bytes/parameter, ${formatBytes(q.activeBytesPerToken)} active per token, mean KL ${q.meanKl.toExponential(3)} nats`,
          );
        }
      }
      if (kvQuality) {
        out('KV cache dtype over the same text (weights as above; mean KL of the next-token distributions against float32 / bf16 KV):');
        for (const q of kvQuality) {
          out(
            `  ${q.kvDtype.padEnd(13)} ${q.bytesPerPosition} KV bytes per token, mean KL vs f32 ${q.meanKlVsFloat32.toExponential(3)}, vs bf16 ${q.meanKlVsBfloat16.toExponential(3)} nats`,
          );
        }
      }
      return 0;
    } finally {
      model.dispose();
    }
  } finally {
    releaseDevice();
  }
}

/**
 * What a sequence's cache costs: KV bytes per position and, for recurrent layers, the state bytes that do not grow
 * with the context.
 */
function cacheBytesText(model: object): string | undefined {
  const m = model as { kvBytesPerPosition?: () => number; stateBytesPerSequence?: () => number };
  if (typeof m.stateBytesPerSequence !== 'function' || typeof m.kvBytesPerPosition !== 'function') return undefined;
  const kv = m.kvBytesPerPosition();
  const state = m.stateBytesPerSequence();
  return `cache per sequence: recurrent state ${formatBytes(state)} (constant in the context) + KV ${formatBytes(kv)} per position (attention layers only; ${formatBytes(state + 4096 * kv)} at 4096 positions)`;
}

/**
 * One decode row. Dispatches, read-backs and peak GPU memory are WebGPU figures: on the CPU they would read as
 * "0 dispatches/token" and "peak GPU 0 B", so the CPU row gives throughput, host time and bandwidth only.
 */
export function decodeRowText(name: string, r: DecodeMeasurement, device: DeviceName, activeBytes: number): string {
  const gpu = device === 'webgpu';
  return [
    `${name.padEnd(10)} prefill ${r.promptTokens} tokens: ${((r.promptTokens / r.prefillMs) * 1000).toFixed(1)} tok/s | decode ${r.decodeSteps} tokens: ${r.decodeTokensPerSecond.toFixed(2)} tok/s`,
    ...(gpu ? [`${r.dispatchesPerToken.toFixed(0)} dispatches/token (${layerDispatchesText(r)})`, `${r.readsPerToken.toFixed(0)} reads/token`] : []),
    `host ${r.hostMicrosPerToken.toFixed(0)} µs/token`,
    `${gbs((activeBytes * r.decodeTokensPerSecond) / 1e9)} GB/s of active weights`,
    ...(gpu ? [`peak GPU ${formatBytes(r.peakGpuBytes)}`] : []),
  ].join(', ');
}

/** Captured against eager host time per token, said the right way round: "2.0x less host work" or "1.6x more". */
export function hostWorkRatio(capturedMicros: number, eagerMicros: number): string {
  if (capturedMicros <= eagerMicros) return `${(eagerMicros / capturedMicros).toFixed(1)}x less host work`;
  return `${(capturedMicros / eagerMicros).toFixed(1)}x more host work: the replay costs more than eager dispatch here`;
}
