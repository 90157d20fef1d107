// `tensorgpu vae-encode`: PNG frames (one image, a numbered sequence such as vae-decode writes, or a video file's
// frames through ffmpeg) through a Wan2.x
// video VAE's encoder (default: the built-in random-weight wan2.1-tiny) to the latent posterior's mean in a
// .safetensors file that vae-decode reads back: the inverse of vae-decode.
import { extname } from 'node:path';
import { releaseDevice, type DeviceRequest } from '../runtime/registry.js';
import { chooseDevice } from './device.js';
import type { Tensor } from '../core/tensor.js';
import { writeLatents } from '../formats/latents-file.js';
import { expandFramePattern, readVideoPng } from '../media/png-frames.js';
import { extractVideoFrames, isVideoFile } from '../media/video-frames.js';
import { encodeTilePlan, type WanVae } from '../models/wan-vae/model.js';
import { gpuCounters, memoryStats, resetPeakMemory, synchronize } from '../runtime/stats.js';
import { formatBytes } from './progress.js';
import { applyLatentStats, describeTiling, loadVaePart, runStepsWaiting, stepProgress, tilingFromFlags, vaeClassName, type TilingFlags } from './vae-common.js';

export interface VaeEncodeCliOptions extends TilingFlags {
  /** AutoencoderKLWan / AutoencoderKLQwenImage directory; default the built-in wan2.1-tiny. */
  model?: string;
  /** A PNG, a printf-style pattern of numbered PNGs (frames-%04d.png), or a video file (read through ffmpeg). */
  input: string;
  /** The .safetensors file to write (tensor 'latents', [1, z_dim, T, h, w]). */
  out: string;
  device: DeviceRequest;
  /** Apply the pipeline's latent normalization ((z - mean) / std) to what is written. */
  normalize?: boolean;
}

const shapeOf = (t: Tensor) => `[${t.shape.join(', ')}]`;

export async function runVaeEncode(
  o: VaeEncodeCliOptions,
  out: (line: string) => void = (l) => process.stdout.write(l + '\n'),
  log: (line: string) => void = (l) => process.stderr.write(l + '\n'),
): Promise<number> {
  let vae: WanVae | undefined;
  let x: Tensor | undefined;
  let z: Tensor | undefined;
  try {
    if (extname(o.out).toLowerCase() !== '.safetensors')
      throw new Error(`--out ${o.out}: latents are written as .safetensors (what vae-decode --latents and diffusers read)`);
    const device = await chooseDevice(o.device, log);
    // Missing or unreadable frames fail before the model is generated or loaded.
    const video = isVideoFile(o.input) ? extractVideoFrames(o.input) : undefined;
    let paths: string[];
    try {
      paths = expandFramePattern(video?.pattern ?? o.input);
      x = await readVideoPng(paths, { device });
    } finally {
      video?.cleanup();
    }
    const loaded = await loadVaePart(o.model, 'encoder', device, log);
    vae = loaded.vae;
    const ts = vae.temporalScale;
    const usable = 1 + ts * Math.floor((paths.length - 1) / ts);
    if (usable < paths.length) {
      // diffusers' _encode reads 1 + 4k frames and ignores the rest the same way.
      log(`${o.input}: ${paths.length} frames; the encoder takes 1 + ${ts}k, so the last ${paths.length - usable} are left out`);
      paths = paths.slice(0, usable);
      const all = x;
      x = all.narrow(2, 0, usable);
      all.dispose();
    }
    const [, , f, h, w] = x.shape;
    const s = vae.spatialScale;
    if (h % s !== 0 || w % s !== 0) {
      const fit = `${Math.floor(w / s) * s}x${Math.floor(h / s) * s}`;
      throw new Error(`${paths[0]}: frames are ${w}x${h}; this VAE needs width and height multiples of ${s} (crop or resize to e.g. ${fit})`);
    }

    const tiling = tilingFromFlags(o);
    const plan = tiling ? encodeTilePlan(vae.config, h, w, tiling) : undefined;
    await synchronize();
    resetPeakMemory();
    const before = gpuCounters();
    const t0 = performance.now();
    const bar = stepProgress('encoding');
    try {
      z = await runStepsWaiting(vae.encodeSteps(x, { tiling }), (p) => bar.update(p));
    } finally {
      bar.stop();
    }
    await synchronize();
    const encodeMs = performance.now() - t0;
    const after = gpuCounters();
    const peak = memoryStats().peakLiveBytes;
    x.dispose();
    if (o.normalize) z = applyLatentStats(z, vae, 'normalize', loaded.dir);
    await writeLatents(o.out, z);

    const files = video ? `${paths.length} frames decoded by ffmpeg` : paths.length === 1 ? paths[0] : `${paths[0]} ... ${paths.at(-1)}`;
    out(`model: ${loaded.dir} (${vaeClassName(vae)}, z_dim ${vae.config.zDim}, base_dim ${vae.config.baseDim}) on ${device}`);
    out(`input: ${o.input} (${f} frame${f === 1 ? '' : 's'} of ${w}x${h}: ${files})`);
    out(`latents: ${shapeOf(z)} written to ${o.out} (tensor 'latents'${o.normalize ? ', normalized with latents_mean / latents_std' : ''})`);
    out(`encode: ${(encodeMs / 1000).toFixed(2)} s (${describeTiling(plan)})`);
    if (device === 'webgpu') {
      out(
        `webgpu: ${after.dispatches - before.dispatches} dispatches, ${after.pipelinesCompiled - before.pipelinesCompiled} pipelines compiled, peak GPU memory ${formatBytes(peak)}`,
      );
    }
    return 0;
  } finally {
    z?.dispose();
    x?.dispose();
    vae?.dispose();
    releaseDevice();
  }
}
