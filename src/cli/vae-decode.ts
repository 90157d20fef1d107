// `tensorgpu vae-decode`: latents (a .safetensors / .npy file, or seeded random ones) through a Wan2.x video VAE's
// decoder (default: a built-in random-weight wan2.1-tiny) to PNG frames plus, for several frames, an animated
// preview; with the decode time and, on WebGPU, the dispatch count and peak GPU memory.
import { extname, basename, dirname, join } from 'node:path';
import { releaseDevice, type DeviceRequest } from '../runtime/registry.js';
import { chooseDevice } from './device.js';
import { Generator } from '../core/random.js';
import type { Tensor } from '../core/tensor.js';
import { readLatents } from '../formats/latents-file.js';
import { writeVideoPng } from '../media/png-writer.js';
import { hasFfmpeg, openPreview, previewFormat, type PreviewWriter } from '../media/video-preview.js';
import { randn } from '../ops/creation.js';
import { decodeTilePlan, type WanVae } from '../models/wan-vae/model.js';
import { gpuCounters, memoryStats, resetPeakMemory, synchronize } from '../runtime/stats.js';
import { formatBytes } from './progress.js';
import { applyLatentStats, describeTiling, loadVaePart, runStepsWaiting, stepProgress, tilingFromFlags, vaeClassName, type TilingFlags } from './vae-common.js';

export interface VaeDecodeCliOptions extends TilingFlags {
  /** AutoencoderKLWan / AutoencoderKLQwenImage directory; default the built-in wan2.1-tiny. */
  model?: string;
  /** .safetensors or .npy; default random normal [1, zDim, 1, 16, 16]. */
  latents?: string;
  out: string;
  device: DeviceRequest;
  /** Seed of the default random latents. */
  seed?: number;
  /** Undo the pipeline's latent normalization (z * std + mean) before decoding. */
  denormalize?: boolean;
  /** Animated preview of several frames: a .gif, .mp4 or .webm path (default <stem>.gif); false for none. */
  preview?: string | false;
  /** Preview frame rate (default 16, Wan2.1's). */
  fps?: number;
  /** Run each chunk's decoder through compile() (WanVae DecodeOptions.compile). */
  compile?: boolean;
}

/** Spatial size of the default random latents: 128x128 pixels from the Wan2.1 VAE, quick even on a CPU. */
const DEFAULT_LATENT_SIZE = 16;
const DEFAULT_FPS = 16;

const shapeOf = (t: Tensor) => `[${t.shape.join(', ')}]`;

/** The chunk signatures' modes and calls, from explain() (which lists one per signature). */
export function describeCompiled(explained: string | undefined): string {
  if (!explained) return 'not run';
  const modes = [...explained.matchAll(/^- \(.*\): (\w+), (\d+) call\(s\)(; eager because .*)?$/gm)].map((m) => `${m[1]} x${m[2]}${m[3] ?? ''}`);
  return `${modes.length} chunk signature(s): ${modes.join(', ')} (traced: ran eagerly once; recorded: replayed after the second call)`;
}

/** The default preview beside the frames: out.png -> out.gif. */
export function defaultPreviewPath(out: string): string {
  return join(dirname(out), `${basename(out, extname(out))}.gif`);
}

export async function runVaeDecode(
  o: VaeDecodeCliOptions,
  out: (line: string) => void = (l) => process.stdout.write(l + '\n'),
  log: (line: string) => void = (l) => process.stderr.write(l + '\n'),
): Promise<number> {
  let vae: WanVae | undefined;
  let z: Tensor | undefined;
  let video: Tensor | undefined;
  let preview: PreviewWriter | undefined;
  try {
    // Preview options fail before any work.
    const previewPath = o.preview === false ? undefined : (o.preview ?? defaultPreviewPath(o.out));
    if (previewPath && previewFormat(previewPath) !== 'gif' && !hasFfmpeg())
      throw new Error(`--preview ${previewPath}: writing ${extname(previewPath)} needs ffmpeg on PATH, and none was found (a .gif preview needs nothing)`);
    const device = await chooseDevice(o.device, log);
    // A bad latents file fails before the model is generated or loaded.
    if (o.latents) z = await readLatents(o.latents, { device });
    const loaded = await loadVaePart(o.model, 'decoder', device, log);
    vae = loaded.vae;
    const config = vae.config;

    const seed = o.seed ?? 1;
    z ??= randn([1, config.zDim, 1, DEFAULT_LATENT_SIZE, DEFAULT_LATENT_SIZE], { device, generator: new Generator(seed) });
    const source = o.latents ?? `random normal, seed ${seed}`;
    if (z.shape[1] !== config.zDim) {
      throw new Error(`${o.latents ?? 'latents'}: latents have ${z.shape[1]} channels (shape ${shapeOf(z)}), the model's z_dim is ${config.zDim}`);
    }
    if (z.shape.some((d) => d === 0)) throw new Error(`${o.latents ?? 'latents'}: latents ${shapeOf(z)} are empty`);
    if (o.denormalize) z = applyLatentStats(z, vae, 'denormalize', loaded.dir);

    const tiling = tilingFromFlags(o);
    const [, , t, h, w] = z.shape;
    const plan = tiling ? decodeTilePlan(config, h, w, tiling) : undefined;

    await synchronize();
    resetPeakMemory();
    const before = gpuCounters();
    const t0 = performance.now();
    const bar = stepProgress('decoding');
    try {
      // Waiting for the device after each chunk: the bar counts decoded chunks, and the time is the decode's.
      video = await runStepsWaiting(vae.decodeSteps(z, { tiling, compile: o.compile }), (p) => bar.update(p));
    } finally {
      bar.stop();
    }
    await synchronize();
    const decodeMs = performance.now() - t0;
    const after = gpuCounters();
    const peak = memoryStats().peakLiveBytes;

    const [, c, f, vh, vw] = video.shape;
    const fps = o.fps ?? DEFAULT_FPS;
    if (previewPath && f > 1) preview = openPreview(previewPath, { width: vw, height: vh, fps });
    const t1 = performance.now();
    const paths = await writeVideoPng(video, o.out, { onFrame: preview && ((pixels, channels) => preview!.addFrame(pixels, channels)) });
    await preview?.finish();
    const writeMs = performance.now() - t1;

    out(`model: ${loaded.dir} (${vaeClassName(vae)}, z_dim ${config.zDim}, base_dim ${config.baseDim}) on ${device}`);
    out(`latents: ${shapeOf(z)} (${source}${o.denormalize ? ', denormalized with latents_mean / latents_std' : ''})`);
    out(`output: ${shapeOf(video)} (${f} frame${f === 1 ? '' : 's'} of ${vw}x${vh}, ${c === 1 ? 'grayscale' : 'RGB'}; ${t} latent frame${t === 1 ? '' : 's'})`);
    out(`frames written: ${paths.length <= 8 ? paths.join(', ') : `${paths.length} PNGs, ${paths[0]} ... ${paths.at(-1)}`}`);
    if (preview)
      out(
        `preview: ${preview.path} (${f} frames at ${fps} fps, ${{ gif: 'animated GIF', mp4: 'MP4 through ffmpeg', webm: 'WebM through ffmpeg' }[preview.format]})`,
      );
    out(`decode: ${(decodeMs / 1000).toFixed(2)} s (${describeTiling(plan)}), ${preview ? 'PNG + preview' : 'PNG'} write ${(writeMs / 1000).toFixed(2)} s`);
    if (device === 'webgpu') {
      const pads = (after.byKernel.pad ?? 0) - (before.byKernel.pad ?? 0);
      out(
        `webgpu: ${after.dispatches - before.dispatches} dispatches (${pads} pad), ${after.pipelinesCompiled - before.pipelinesCompiled} pipelines compiled, peak GPU memory ${formatBytes(peak)}`,
      );
    }
    if (o.compile) out(`compile: ${describeCompiled(vae.explainCompiled())}`);
    preview = undefined; // finished: nothing to abort
    return 0;
  } finally {
    preview?.abort();
    video?.dispose();
    z?.dispose();
    vae?.dispose();
    releaseDevice();
  }
}
