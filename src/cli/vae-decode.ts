// `tensorgpu vae-decode`: latents (a .safetensors / .npy file, or seeded random ones) through a Wan2.x video VAE's
// decoder (default: a built-in random-weight wan2.1-tiny) to PNG frames, with the decode time and, on WebGPU, the
// dispatch count and peak GPU memory.
import { initDevice, releaseDevice, type DeviceRequest } from '../backends/registry.js';
import { Generator } from '../core/random.js';
import type { Tensor } from '../core/tensor.js';
import { readLatents } from '../io/latents-file.js';
import { writeVideoPng } from '../io/png-writer.js';
import { randn, tensor } from '../ops/creation.js';
import { tidy } from '../core/scope.js';
import { convScale } from '../models/wan-vae/config.js';
import { DEFAULT_VAE_PRESET, ensureDefaultVae } from '../models/wan-vae/default-model.js';
import { loadWanVae } from '../models/wan-vae/load.js';
import type { WanVae } from '../models/wan-vae/model.js';
import { gpuCounters, memoryStats, resetPeakMemory, synchronize } from '../runtime-stats.js';
import { byteProgress, formatBytes } from './progress.js';

export interface VaeDecodeCliOptions {
  /** AutoencoderKLWan directory; default the built-in wan2.1-tiny. */
  model?: string;
  /** .safetensors or .npy; default random normal [1, zDim, 1, 16, 16]. */
  latents?: string;
  out: string;
  device: DeviceRequest;
  /** Seed of the default random latents. */
  seed?: number;
  /** Tile size and stride in decoder pixels (diffusers' 256 / 192). */
  tile?: number;
  tileStride?: number;
  /** false for --no-tiling. */
  tiling?: boolean;
  /** Undo the pipeline's latent normalization (z * std + mean) before decoding. */
  denormalize?: boolean;
}

/** Spatial size of the default random latents: 128x128 pixels from the Wan2.1 VAE, quick even on a CPU. */
const DEFAULT_LATENT_SIZE = 16;

const shapeOf = (t: Tensor) => `[${t.shape.join(', ')}]`;

export async function runVaeDecode(o: VaeDecodeCliOptions, out: (line: string) => void = (l) => process.stdout.write(l + '\n'), log: (line: string) => void = (l) => process.stderr.write(l + '\n')): Promise<number> {
  let vae: WanVae | undefined;
  let z: Tensor | undefined;
  let video: Tensor | undefined;
  try {
    const device = await initDevice(o.device, { onNotice: log });
    // A bad latents file fails before the model is generated or loaded.
    if (o.latents) z = await readLatents(o.latents, { device });
    let dir = o.model;
    if (dir === undefined) {
      dir = await ensureDefaultVae({ onNotice: log });
      log(`no --model given: using the built-in ${DEFAULT_VAE_PRESET} video VAE (random weights) in ${dir}`);
    }
    let bar: ReturnType<typeof byteProgress> | undefined;
    let loaded = 0;
    vae = await loadWanVae(dir, {
      device,
      parts: 'decoder',
      onProgress: (done, total) => {
        bar ??= byteProgress('loading decoder', total);
        bar.add(done - loaded);
        loaded = done;
      },
    });
    bar?.stop();
    const config = vae.config;

    const seed = o.seed ?? 1;
    z ??= randn([1, config.zDim, 1, DEFAULT_LATENT_SIZE, DEFAULT_LATENT_SIZE], { device, generator: new Generator(seed) });
    const source = o.latents ?? `random normal, seed ${seed}`;
    if (z.shape[1] !== config.zDim) {
      throw new Error(`${o.latents ?? 'latents'}: latents have ${z.shape[1]} channels (shape ${shapeOf(z)}), the model's z_dim is ${config.zDim}`);
    }
    if (z.shape.some((d) => d === 0)) throw new Error(`${o.latents ?? 'latents'}: latents ${shapeOf(z)} are empty`);
    if (o.denormalize) {
      const { latentsMean: mean, latentsStd: std } = config;
      if (!mean || !std) throw new Error(`--denormalize: ${dir}/config.json has no latents_mean / latents_std`);
      const raw = z;
      z = tidy(() => {
        const s = tensor(new Float32Array(std), { device, shape: [1, config.zDim, 1, 1, 1] });
        const m = tensor(new Float32Array(mean), { device, shape: [1, config.zDim, 1, 1, 1] });
        return raw.mul(s).add(m);
      });
      raw.dispose();
    }

    const tiling = o.tiling === false ? false : { tileSize: o.tile ?? 256, stride: o.tileStride ?? 192 };
    const [, , t, h, w] = z.shape;
    const scale = convScale(config);
    const tiled = tiling && (h * scale > tiling.tileSize || w * scale > tiling.tileSize);

    await synchronize();
    resetPeakMemory();
    const before = gpuCounters();
    const t0 = performance.now();
    video = vae.decode(z, { tiling });
    // Decoding is queued on WebGPU: wait for it so the time is the decode's, not the PNG encoder's.
    await synchronize();
    const decodeMs = performance.now() - t0;
    const after = gpuCounters();
    const t1 = performance.now();
    const paths = await writeVideoPng(video, o.out);
    const writeMs = performance.now() - t1;
    const peak = memoryStats().peakLiveBytes;

    const [, c, f, vh, vw] = video.shape;
    out(`model: ${dir} (AutoencoderKLWan, z_dim ${config.zDim}, base_dim ${config.baseDim}) on ${device}`);
    out(`latents: ${shapeOf(z)} (${source}${o.denormalize ? ', denormalized with latents_mean / latents_std' : ''})`);
    out(`output: ${shapeOf(video)} (${f} frame${f === 1 ? '' : 's'} of ${vw}x${vh}, ${c === 1 ? 'grayscale' : 'RGB'}; ${t} latent frame${t === 1 ? '' : 's'})`);
    out(`frames written: ${paths.length <= 8 ? paths.join(', ') : `${paths.length} PNGs, ${paths[0]} ... ${paths.at(-1)}`}`);
    out(`decode: ${(decodeMs / 1000).toFixed(2)} s (${tiled ? `tiled ${tiling.tileSize} / stride ${tiling.stride}` : 'one tile'}), PNG write ${(writeMs / 1000).toFixed(2)} s`);
    if (device === 'webgpu') {
      const pads = (after.byKernel.pad ?? 0) - (before.byKernel.pad ?? 0);
      out(`webgpu: ${after.dispatches - before.dispatches} dispatches (${pads} pad), ${after.pipelinesCompiled - before.pipelinesCompiled} pipelines compiled, peak GPU memory ${formatBytes(peak)}`);
    }
    return 0;
  } finally {
    video?.dispose();
    z?.dispose();
    vae?.dispose();
    releaseDevice();
  }
}
