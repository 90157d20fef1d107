// PNG frames -> video [1, 3, F, H, W] in [-1, 1] for `tensorgpu vae-encode`: one PNG, or a numbered sequence named
// by a printf-style pattern (frames-%04d.png, as ffmpeg's image2 reads and `vae-decode` writes). Pixels map to
// [-1, 1] as diffusers' VaeImageProcessor does (x / 255 * 2 - 1); alpha is dropped and grayscale is spread to RGB.
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { PNG } from 'pngjs';
import type { DeviceName } from '../runtime/backend.js';
import { getDefaultDevice } from '../runtime/registry.js';
import { CheckpointError, ShapeError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from '../ops/creation.js';

/** `%d` or `%0Nd` (one of them), with `%%` for a literal percent sign. */
const INDEX = /%(0?\d*)d/;

/** True when path names a sequence rather than one file. */
export function isFramePattern(path: string): boolean {
  return INDEX.test(path.replaceAll('%%', ''));
}

/** The pattern's path for frame i. */
export function framePath(pattern: string, i: number): string {
  const parts = pattern.split('%%');
  const k = parts.findIndex((p) => INDEX.test(p));
  const m = INDEX.exec(parts[k]);
  if (!m) return pattern;
  const width = m[1] ? Number(m[1]) : 0;
  parts[k] = parts[k].replace(INDEX, String(i).padStart(width, '0'));
  return parts.join('%');
}

/**
 * The files a pattern names: consecutive frames from the first index found in 0..4 (ffmpeg's default
 * start_number search) up to the first missing one; a path with no pattern is itself.
 */
export function expandFramePattern(pattern: string, exists: (path: string) => boolean = existsSync): string[] {
  if (!isFramePattern(pattern)) return [pattern];
  const first = [0, 1, 2, 3, 4].find((i) => exists(framePath(pattern, i)));
  if (first === undefined) throw new CheckpointError(`no frame found (looked for ${framePath(pattern, 0)} ... ${framePath(pattern, 4)})`, { file: pattern });
  const paths: string[] = [];
  for (let i = first; exists(framePath(pattern, i)); i++) paths.push(framePath(pattern, i));
  return paths;
}

async function decodePng(path: string): Promise<PNG> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (e) {
    throw new CheckpointError(`cannot read: ${(e as Error).message}`, { file: path });
  }
  try {
    // pngjs expands every colour type and bit depth to 8-bit RGBA.
    return PNG.sync.read(bytes);
  } catch (e) {
    throw new CheckpointError(`not a readable PNG: ${(e as Error).message}`, { file: path });
  }
}

/**
 * Reads PNG frames into video [1, 3, F, H, W] (float32, [-1, 1]) on device. Frames are decoded one at a time into
 * one host buffer, so host memory is the video plus one file. Every frame must have the first one's size.
 */
export async function readVideoPng(paths: readonly string[], options: { device?: DeviceName } = {}): Promise<Tensor> {
  if (paths.length === 0) throw new ShapeError('readVideoPng: no frames given');
  const first = await decodePng(paths[0]);
  const [h, w, f] = [first.height, first.width, paths.length];
  const plane = h * w;
  const data = new Float32Array(3 * f * plane);
  for (let i = 0; i < f; i++) {
    const png = i === 0 ? first : await decodePng(paths[i]);
    if (png.width !== w || png.height !== h) throw new ShapeError(`${paths[i]}: frame is ${png.width}x${png.height}, but ${paths[0]} is ${w}x${h}`);
    for (let c = 0; c < 3; c++) {
      const base = (c * f + i) * plane;
      for (let p = 0; p < plane; p++) data[base + p] = (png.data[4 * p + c] / 255) * 2 - 1;
    }
  }
  return tensor(data, { device: options.device ?? getDefaultDevice(), shape: [1, 3, f, h, w] });
}
