// `tensorgpu checkpoint generate|inspect|load`: write a random-weight checkpoint in the HF layout, list a
// checkpoint's tensors, and stream a whole checkpoint onto a device with a progress bar and the figures that
// matter (GB/s, device and host memory).
import { basename } from 'node:path';
import { releaseDevice, type DeviceRequest } from '../runtime/registry.js';
import { chooseDevice } from './device.js';
import { DTYPE_INFO } from '../core/dtype.js';
import type { Tensor } from '../core/tensor.js';
import { Checkpoint } from '../formats/checkpoint.js';
import { familyOf, isSupportedModelType, presetNamed } from '../models/families.js';
import type { RandomWeightDType } from '../models/random-weights.js';
import { presetTokenizerFiles } from '../models/builtin.js';
import { memoryStats, synchronize } from '../runtime/stats.js';
import { byteProgress, formatBytes } from './progress.js';
import { localModelPath } from './model-source.js';

type Out = (line: string) => void;
const stdout: Out = (line) => process.stdout.write(line + '\n');

export interface GenerateOptions {
  preset: string;
  out: string;
  dtype: RandomWeightDType;
  seed: number;
  shardMb?: number;
}

export async function runGenerateCheckpoint(o: GenerateOptions, out: Out = stdout): Promise<number> {
  const { family, config } = presetNamed(o.preset);
  const t0 = performance.now();
  // With its family's tokenizer files, as the built-in models and `train --full` write them: the folder is a whole
  // model that `generate --model <out>` runs.
  const tokenizerFiles = await presetTokenizerFiles(o.preset);
  const files = await family.writeRandom(o.out, config, {
    dtype: o.dtype,
    seed: o.seed,
    // As the built-in models: logits spread like a trained model's, so the random text varies with --seed.
    outputSpread: true,
    shardBytes: o.shardMb ? o.shardMb * 2 ** 20 : undefined,
    extraFiles: tokenizerFiles,
  });
  out(
    `wrote ${o.preset} (${o.dtype}, seed ${o.seed}) to ${o.out}: ${[...files, ...Object.keys(tokenizerFiles)].join(', ')} in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );
  return 0;
}

export async function runInspectCheckpoint(source: string, out: Out = stdout): Promise<number> {
  const path = await localModelPath(source);
  await using ck = await Checkpoint.open(path);
  if (ck.config !== undefined) {
    try {
      const family = familyOf(ck.config, 'config.json');
      const c = family.parseConfig(ck.config, 'config.json');
      const q = (c as { quantization?: { format: string } }).quantization;
      out(`config: ${family.describe(c)}${q ? `, ${q.format} weights` : ''}`);
      for (const u of family.unusedTensors ?? []) {
        const n = ck.names.filter((name) => name.startsWith(u.prefix)).length;
        if (n > 0) out(`not loaded: ${n} tensors of ${u.what} (${u.prefix}*); tensorgpu runs the text model`);
      }
    } catch (e) {
      out(`config: not a supported model (${(e as Error).message})`);
    }
  }
  const names = ck.names;
  out(`${names.length} tensors, ${formatBytes(ck.totalBytes)}`);
  for (const name of names) {
    const e = ck.entry(name);
    out(`  ${name}  ${e.format} [${e.shape.join(', ')}]  ${formatBytes(e.end - e.begin)}  ${basename(e.file)}@${e.begin}`);
  }
  return 0;
}

export interface LoadOptions {
  model: string;
  device: DeviceRequest;
  /** 'fp8' / 'int4' quantize float linear weights at load; a float dtype converts non-FP8 tensors. */
  dtype?: 'fp8' | 'int4' | 'float32' | 'float16' | 'bfloat16';
  /** int4 group size (default 128). */
  groupSize?: number;
}

/**
 * Loads every tensor the way a model would: linear weights of a supported model's checkpoint through loadWeight
 * (FP8 scales attached, optional FP8 quantization), everything else as stored. Other checkpoints load tensor by
 * tensor.
 */
export async function runLoadCheckpoint(o: LoadOptions, out: Out = stdout): Promise<number> {
  const device = await chooseDevice(o.device, out);
  const held: Tensor[] = [];
  let hostPeak = process.memoryUsage().rss;
  const hostBefore = hostPeak;
  const sampler = setInterval(() => (hostPeak = Math.max(hostPeak, process.memoryUsage().rss)), 20);
  try {
    const dir = await localModelPath(o.model);
    await using ck = await Checkpoint.open(dir);
    const bar = byteProgress(`loading ${basename(dir)}`, ck.totalBytes);
    const onBytes = (n: number) => bar.add(n);
    const quantize = o.dtype === 'fp8' ? ('float8_e4m3fn' as const) : o.dtype === 'int4' ? ('int4' as const) : undefined;
    const dtype = o.dtype === 'fp8' || o.dtype === 'int4' ? undefined : o.dtype;
    const errors: [string, number][] = [];
    const onQuantError = (prefix: string, e: number) => errors.push([prefix, e]);
    const t0 = performance.now();
    let linears = 0;
    let linearBytes = 0;
    let linearParams = 0;
    // The projections alone (lm_head, which keeps its precision, left out): what --dtype int4 / fp8 changes.
    let projectionBytes = 0;
    let projectionParams = 0;
    try {
      // Only a config of a supported family is held to that family's layout; another model's config.json (a
      // diffusers VAE, a llama) means tensor by tensor, as when there is no config at all.
      const file = `${dir}/config.json`;
      const family = isSupportedModelType(ck.config) ? familyOf(ck.config, file) : undefined;
      const config = family?.parseConfig(ck.config, file);
      const specs = family && config && (family.checkpointSpecs?.(ck, config) ?? family.weightSpecs(config));
      if (specs) {
        for (const spec of specs) {
          if (spec.role === 'linear' || spec.role === 'lm_head') {
            // As in the official FP8 checkpoints, lm_head keeps its precision (logits are sensitive to it).
            const w = await ck.loadWeight(spec.name.replace(/\.weight$/, ''), {
              device,
              dtype,
              quantize: spec.role === 'linear' ? quantize : undefined,
              groupSize: o.groupSize,
              onQuantError,
              onBytes,
            });
            const parts = [w.data, ...(w.scale ? [w.scale] : []), ...(w.int4 ? [w.int4.zero, ...(w.int4.perm ? [w.int4.perm] : [])] : [])];
            held.push(...parts);
            const bytes = parts.reduce((a, t) => a + t.numel * DTYPE_INFO[t.dtype].itemBytes, 0);
            const params = w.int4 ? w.data.numel * 8 : w.data.numel;
            linearBytes += bytes;
            linearParams += params;
            if (spec.role === 'linear') {
              projectionBytes += bytes;
              projectionParams += params;
            }
            linears++;
          } else {
            held.push(await ck.load(spec.name, { device, dtype, onBytes }));
          }
        }
      } else {
        for (const name of ck.names) held.push(await ck.load(name, { device, dtype, onBytes }));
      }
      await synchronize();
    } finally {
      bar.stop();
    }
    const seconds = (performance.now() - t0) / 1000;
    const mem = memoryStats();
    out(
      `loaded ${held.length} tensors (${linears} linear weights${quantize === 'int4' ? ', quantized to int4' : quantize ? ', quantized to FP8' : ''}) onto ${device}: ${formatBytes(ck.totalBytes)} read in ${seconds.toFixed(2)} s (${(ck.totalBytes / seconds / 1e9).toFixed(2)} GB/s)`,
    );
    for (const [prefix, e] of errors) out(`  int4 ${prefix}: relative error ${e.toExponential(3)}`);
    if (errors.length > 0) out(`int4 error: mean ${(errors.reduce((a, [, e]) => a + e, 0) / errors.length).toExponential(3)} over ${errors.length} weights`);
    if (linearParams > 0)
      out(
        `linear weights: ${formatBytes(linearBytes)} for ${linearParams} parameters, ${(linearBytes / linearParams).toFixed(4)} bytes per parameter (scales included)` +
          (projectionParams > 0 && projectionParams < linearParams
            ? `; projections without lm_head: ${(projectionBytes / projectionParams).toFixed(4)} bytes per parameter`
            : ''),
      );
    if (device === 'webgpu') out(`GPU memory: ${formatBytes(mem.liveBytes)} live, ${formatBytes(mem.peakLiveBytes)} peak`);
    else out(`tensor memory: ${formatBytes(held.reduce((a, t) => a + t.numel * DTYPE_INFO[t.dtype].itemBytes, 0))}`);
    out(`host memory: peak RSS ${formatBytes(hostPeak)} (+${formatBytes(hostPeak - hostBefore)} during the load)`);
    return 0;
  } finally {
    clearInterval(sampler);
    for (const t of held) t.dispose();
    releaseDevice();
  }
}
