// Wan VAE decode of one latent frame at 480x832 (latent 60x104, Wan2.1's 8x scale), untiled vs tiled with
// diffusers' defaults (256 px tiles, 192 px stride, linear blending), on a generated random-weight model of the
// Wan2.1 architecture at reduced width (the structure, padding and tiling are the real ones; the channel counts
// are small enough for a software adapter). Reports time, dispatches (and padding dispatches: there must be none),
// and peak GPU memory: tiling trades dispatches and time for memory bounded by one tile.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Generator } from '../src/core/random.js';
import { tensor } from '../src/ops/creation.js';
import { gpuCounters, memoryStats, resetPeakMemory, synchronize } from '../src/runtime/stats.js';
import { loadWanVae } from '../src/models/wan-vae/load.js';
import type { DecodeOptions, WanVae } from '../src/models/wan-vae/model.js';
import { WAN_VAE_PRESETS, writeRandomWanVae } from '../src/models/wan-vae/random-checkpoint.js';
import type { BenchCase, BenchContext, RowInput } from './harness.js';

const UNTILED = 'vae decode untiled';
const TILED = 'vae decode tiled 256/192';
const PRESET = 'wan2.1-tiny';

export function vaeDecodeCases(quick: boolean): BenchCase[] {
  const [h, w] = quick ? [30, 52] : [60, 104];
  const shape = `${PRESET} latent 1x${h}x${w} -> ${h * 8}x${w * 8}`;
  return [{ benchmark: 'vae decode', shape, run: (ctx) => measure(ctx, h, w, shape) }];
}

async function decodeOnce(vae: WanVae, h: number, w: number, options: DecodeOptions) {
  const g = new Generator(7);
  const data = new Float32Array(16 * h * w).map(() => g.normal());
  const flat = tensor(data, { device: 'webgpu' });
  const z = flat.reshape([1, 16, 1, h, w]);
  flat.dispose();
  await synchronize();
  resetPeakMemory();
  const before = gpuCounters();
  const t0 = performance.now();
  const out = vae.decode(z, options);
  await out.toArray();
  const ms = performance.now() - t0;
  const after = gpuCounters();
  const peak = memoryStats().peakLiveBytes;
  const outBytes = out.numel * 4;
  out.dispose();
  z.dispose();
  return { ms, dispatches: after.dispatches - before.dispatches, pads: (after.byKernel.pad ?? 0) - (before.byKernel.pad ?? 0), peak, outBytes };
}

async function measure(ctx: BenchContext, h: number, w: number, shape: string): Promise<RowInput[]> {
  if (!ctx.gpu) return [UNTILED, TILED].map((benchmark) => ({ benchmark, shape, backend: 'cpu', note: 'WebGPU only' }));
  const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-bench-vae-'));
  const rows: RowInput[] = [];
  try {
    await writeRandomWanVae(dir, WAN_VAE_PRESETS[PRESET], { dtype: 'bfloat16', seed: 5 });
    const vae = await loadWanVae(dir, { device: 'webgpu', parts: 'decoder' });
    try {
      await decodeOnce(vae, 8, 8, {}); // compiles the pipelines
      await decodeOnce(vae, 40, 40, { tiling: true });
      for (const [benchmark, options] of [
        [UNTILED, {}],
        [TILED, { tiling: true }],
      ] as const) {
        const r = await decodeOnce(vae, h, w, options);
        const mib = (b: number) => (b / 2 ** 20).toFixed(1);
        ctx.log(`  ${benchmark}: ${r.ms.toFixed(0)} ms, ${r.dispatches} dispatches (${r.pads} pad), peak ${mib(r.peak)} MiB (output ${mib(r.outBytes)} MiB)`);
        rows.push({
          benchmark,
          shape,
          backend: 'webgpu',
          timing: { medianMs: r.ms, minMs: r.ms, runs: 1, dispatchesPerRun: r.dispatches },
          baselineBenchmark: UNTILED,
          note: `${benchmark}: ${r.pads} pad dispatches, peak GPU ${mib(r.peak)} MiB (output ${mib(r.outBytes)} MiB)`,
        });
      }
    } finally {
      vae.dispose();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}
