// An animated preview of decoded frames, written frame by frame as they are read back: an animated GIF through
// gifenc (pure JavaScript, so it works everywhere; each frame gets its own 256-colour palette, which suits video
// better than one palette for all), or an MP4 / WebM through ffmpeg when it is on PATH (full colour, small files).
import { spawn, spawnSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { extname } from 'node:path';
import type * as Gifenc from 'gifenc';

// gifenc is CommonJS whose named exports Node's ESM loader cannot detect (esbuild's __export), so require it.
const { applyPalette, GIFEncoder, quantize } = createRequire(import.meta.url)('gifenc') as typeof Gifenc;

export type PreviewFormat = 'gif' | 'mp4' | 'webm';

export interface PreviewOptions {
  width: number;
  height: number;
  /** Frames per second (Wan2.1 videos are 16). */
  fps: number;
}

/** Accepts interleaved 8-bit frames ([H, W, 3] RGB or [H, W] grayscale) in order; finish() completes the file. */
export interface PreviewWriter {
  readonly path: string;
  readonly format: PreviewFormat;
  addFrame(pixels: Uint8Array, channels: 1 | 3): Promise<void>;
  finish(): Promise<void>;
  /** Stops without completing the file (an error elsewhere). */
  abort(): void;
}

/** The format a preview path asks for by its extension, or an error naming the ones there are. */
export function previewFormat(path: string): PreviewFormat {
  const ext = extname(path).toLowerCase().slice(1);
  if (ext === 'gif' || ext === 'mp4' || ext === 'webm') return ext;
  throw new RangeError(`preview ${path}: unsupported extension '${extname(path) || '(none)'}' (use .gif, or .mp4 / .webm with ffmpeg on PATH)`);
}

/** True when an `ffmpeg` on PATH runs. */
export function hasFfmpeg(command = 'ffmpeg'): boolean {
  const r = spawnSync(command, ['-version'], { stdio: 'ignore' });
  return r.status === 0;
}

/** Opens a preview writer for path (its extension picks the format). */
export function openPreview(path: string, options: PreviewOptions, ffmpeg = 'ffmpeg'): PreviewWriter {
  const format = previewFormat(path);
  if (!Number.isFinite(options.fps) || options.fps <= 0) throw new RangeError(`preview: fps must be positive, got ${options.fps}`);
  return format === 'gif' ? gifWriter(path, options) : ffmpegWriter(path, format, options, ffmpeg);
}

function gifWriter(path: string, { width, height, fps }: PreviewOptions): PreviewWriter {
  const gif = GIFEncoder();
  const rgba = new Uint8Array(width * height * 4);
  let frames = 0;
  return {
    path,
    format: 'gif',
    async addFrame(pixels, channels) {
      for (let p = 0; p < width * height; p++) {
        for (let c = 0; c < 3; c++) rgba[4 * p + c] = pixels[channels * p + (channels === 3 ? c : 0)];
        rgba[4 * p + 3] = 255;
      }
      // The palette from a 4-bit-per-channel histogram (its colours are the exact means of the pixels in each bin):
      // gifenc's default 5-6-5 histogram takes seconds per noisy 832x480 frame, this one ~0.2 s. Pixels are then
      // matched to it at 5-6-5 precision (~50 ms).
      const palette = quantize(rgba, 256, { format: 'rgb444' });
      gif.writeFrame(applyPalette(rgba, palette, 'rgb565'), width, height, { palette, delay: 1000 / fps, repeat: 0 });
      frames++;
    },
    async finish() {
      if (frames === 0) throw new RangeError(`preview ${path}: no frames`);
      gif.finish();
      await writeFile(path, gif.bytesView());
    },
    abort() {},
  };
}

const FFMPEG_CODECS: Record<'mp4' | 'webm', string[]> = {
  // yuv420p is what players expect; it needs even sizes, hence the pad filter (a no-op for VAE frames).
  mp4: ['-c:v', 'libx264', '-crf', '18', '-pix_fmt', 'yuv420p', '-movflags', '+faststart'],
  webm: ['-c:v', 'libvpx-vp9', '-crf', '32', '-b:v', '0', '-pix_fmt', 'yuv420p'],
};

function ffmpegWriter(path: string, format: 'mp4' | 'webm', { width, height, fps }: PreviewOptions, command: string): PreviewWriter {
  const args = [
    '-hide_banner',
    '-loglevel',
    'error',
    '-y',
    '-f',
    'rawvideo',
    '-pix_fmt',
    'rgb24',
    '-s',
    `${width}x${height}`,
    '-framerate',
    String(fps),
    '-i',
    'pipe:0',
  ];
  args.push('-vf', 'pad=ceil(iw/2)*2:ceil(ih/2)*2', ...FFMPEG_CODECS[format], path);
  const child = spawn(command, args, { stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)));
  const exited = new Promise<void>((resolve, reject) => {
    child.on('error', (e) => reject(new Error(`preview ${path}: cannot run ${command}: ${e.message}`)));
    child.on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`preview ${path}: ${command} exited with ${code}: ${stderr.trim() || '(no message)'}`)),
    );
  });
  // A failed ffmpeg is reported by finish(); until then writes into a closed pipe must not crash the process.
  exited.catch(() => {});
  child.stdin.on('error', () => {});
  const rgb = new Uint8Array(width * height * 3);
  return {
    path,
    format,
    async addFrame(pixels, channels) {
      let frame = pixels;
      if (channels === 1) {
        for (let p = 0; p < width * height; p++) rgb[3 * p] = rgb[3 * p + 1] = rgb[3 * p + 2] = pixels[p];
        frame = rgb;
      }
      // Copied: the caller may reuse its buffer before the pipe has taken the bytes.
      // Waiting on the exit too: an ffmpeg that died never drains, and its error is the one to report.
      if (!child.stdin.write(Buffer.from(frame))) await Promise.race([new Promise<void>((resolve) => child.stdin.once('drain', resolve)), exited]);
    },
    async finish() {
      child.stdin.end();
      await exited;
    },
    abort() {
      child.kill();
    },
  };
}
