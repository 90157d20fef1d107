// What `tensorgpu vae-decode` and `vae-encode` share: the model (the built-in default when --model is absent),
// tiling options in diffusers' units, the latent normalization, and running a decode / encode step by step with a
// progress line that counts finished work.
import { localModelPath } from './model-source.js';
import { SingleBar } from 'cli-progress';
import type { DeviceName } from '../runtime/backend.js';
import { tidy } from '../core/scope.js';
import type { Tensor } from '../core/tensor.js';
import { DEFAULT_VAE_PRESET, ensureDefaultVae } from '../models/wan-vae/default-model.js';
import { loadWanVae, type VaePart } from '../models/wan-vae/load.js';
import type { CodecProgress, CodecSteps, WanVae } from '../models/wan-vae/model.js';
import { DEFAULT_TILING, type TilePlan, type TilingOptions } from '../models/wan-vae/tiling.js';
import { tensor } from '../ops/creation.js';
import { synchronize } from '../runtime/stats.js';
import { byteProgress } from './progress.js';

/** Tiling flags: --tile / --tile-stride set both sides; --tile-height etc. set one and win over them. */
export interface TilingFlags {
  tile?: number;
  tileStride?: number;
  tileHeight?: number;
  tileWidth?: number;
  tileStrideHeight?: number;
  tileStrideWidth?: number;
  /** false for --no-tiling. */
  tiling?: boolean;
}

/** The flags as diffusers' enable_tiling() arguments (image pixels), or false for --no-tiling. */
export function tilingFromFlags(o: TilingFlags): TilingOptions | false {
  if (o.tiling === false) return false;
  return {
    tileSampleMinHeight: o.tileHeight ?? o.tile ?? DEFAULT_TILING.tileSampleMinHeight,
    tileSampleMinWidth: o.tileWidth ?? o.tile ?? DEFAULT_TILING.tileSampleMinWidth,
    tileSampleStrideHeight: o.tileStrideHeight ?? o.tileStride ?? DEFAULT_TILING.tileSampleStrideHeight,
    tileSampleStrideWidth: o.tileStrideWidth ?? o.tileStride ?? DEFAULT_TILING.tileSampleStrideWidth,
  };
}

/** "one tile", or "tiled: 2 x 3 tiles of 256x256 px, stride 192x192" (sizes as given, in image pixels). */
export function describeTiling(plan: TilePlan | undefined): string {
  if (!plan) return 'one tile';
  const o = plan.options;
  return `tiled: ${plan.rows.origins.length} x ${plan.cols.origins.length} tiles of ${o.tileSampleMinWidth}x${o.tileSampleMinHeight} px, stride ${o.tileSampleStrideWidth}x${o.tileSampleStrideHeight}`;
}

export const vaeClassName = (vae: WanVae) => (vae.config.family === 'qwen-image' ? 'AutoencoderKLQwenImage' : 'AutoencoderKLWan');

/** Loads part of the VAE in dir (default: the built-in random-weight one, said on log), with a byte bar on a TTY. */
export async function loadVaePart(
  dir: string | undefined,
  part: VaePart,
  device: DeviceName,
  log: (line: string) => void,
): Promise<{ vae: WanVae; dir: string }> {
  if (dir === undefined) {
    dir = await ensureDefaultVae({ onNotice: log });
    log(`no --model given: using the built-in ${DEFAULT_VAE_PRESET} video VAE (random weights) in ${dir}`);
  } else dir = await localModelPath(dir);
  let bar: ReturnType<typeof byteProgress> | undefined;
  let loaded = 0;
  const vae = await loadWanVae(dir, {
    device,
    parts: part,
    onProgress: (done, total) => {
      bar ??= byteProgress(`loading ${part}`, total);
      bar.add(done - loaded);
      loaded = done;
    },
  });
  bar?.stop();
  return { vae, dir };
}

/**
 * z * std + mean (direction 'denormalize', before decoding) or (z - mean) / std ('normalize', after encoding) with
 * the config's latents_mean / latents_std, as the Wan pipelines do. Consumes z.
 */
export function applyLatentStats(z: Tensor, vae: WanVae, direction: 'normalize' | 'denormalize', dir: string): Tensor {
  const { latentsMean: mean, latentsStd: std, zDim } = vae.config;
  if (!mean || !std) {
    z.dispose();
    throw new Error(`--${direction}: ${dir}/config.json has no latents_mean / latents_std`);
  }
  try {
    return tidy(() => {
      const s = tensor(new Float32Array(std), { device: z.device, shape: [1, zDim, 1, 1, 1] });
      const m = tensor(new Float32Array(mean), { device: z.device, shape: [1, zDim, 1, 1, 1] });
      return direction === 'denormalize' ? z.mul(s).add(m) : z.sub(m).div(s);
    });
  } finally {
    z.dispose();
  }
}

/** "tile 2/6, chunk 5/12". */
export function progressText(p: CodecProgress): string {
  return `tile ${p.tiles}/${p.totalTiles}, chunk ${p.chunks}/${p.totalChunks}`;
}

/**
 * Runs steps to their result, waiting for the device (default: every queued GPU command) after each step before
 * reporting it, so reports count finished chunks and tiles rather than queued ones. Stopping early (an error)
 * releases what the steps hold.
 */
export async function runStepsWaiting(steps: CodecSteps, report: (p: CodecProgress) => void, wait: () => Promise<void> = synchronize): Promise<Tensor> {
  let result: Tensor | undefined;
  try {
    for (;;) {
      const r = steps.next();
      if (r.done) {
        result = r.value;
        return result;
      }
      await wait();
      report(r.value);
    }
  } finally {
    if (!result) steps.return(undefined as unknown as Tensor);
  }
}

/** A progress bar over chunks on stderr when it is a TTY, naming finished tiles and chunks; otherwise a no-op. */
export function stepProgress(label: string): { update(p: CodecProgress): void; stop(): void } {
  const stream = process.stderr;
  if (!stream.isTTY) return { update() {}, stop() {} };
  const bar = new SingleBar({
    format: `${label} [{bar}] {percentage}% | {text} | {duration_formatted} | ETA {eta_formatted}`,
    stream,
    hideCursor: true,
    clearOnComplete: false,
  });
  let started = false;
  return {
    update(p) {
      if (!started) bar.start(p.totalChunks, 0, { text: progressText(p) });
      started = true;
      bar.update(p.chunks, { text: progressText(p) });
    },
    stop() {
      if (started) bar.stop();
    },
  };
}
