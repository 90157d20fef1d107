// Decoded video [1, C, F, H, W] in [-1, 1] -> 8-bit PNGs: one frame to the given path, several to a numbered
// sequence beside it. Frames are read back one at a time, so host memory holds one frame whatever the length.
import { writeFile } from 'node:fs/promises';
import { dirname, extname, basename, join } from 'node:path';
import { PNG } from 'pngjs';
import { ShapeError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';

/** The files writeVideoPng writes for `frames` frames: outPath itself, or stem-0000.ext, stem-0001.ext, ... */
export function framePaths(outPath: string, frames: number): string[] {
  if (frames === 1) return [outPath];
  const ext = extname(outPath) || '.png';
  const stem = basename(outPath, extname(outPath));
  return Array.from({ length: frames }, (_, i) => join(dirname(outPath), `${stem}-${String(i).padStart(4, '0')}${ext}`));
}

/** [-1, 1] -> 0..255 as diffusers' postprocessing does ((v + 1) / 2 * 255), rounded and clamped; NaN -> 0. */
export function toByte(v: number): number {
  const b = Math.round((v + 1) * 127.5);
  return b > 255 ? 255 : b >= 0 ? b : 0;
}

/** One frame's planar values ([C, H, W] in [-1, 1]) -> interleaved bytes [H, W, C]. */
export function interleaveFrame(planes: ArrayLike<number>, channels: 1 | 3, height: number, width: number): Buffer {
  const pixels = height * width;
  const data = Buffer.alloc(pixels * channels);
  for (let c = 0; c < channels; c++) {
    const plane = c * pixels;
    for (let p = 0; p < pixels; p++) data[p * channels + c] = toByte(planes[plane + p]);
  }
  return data;
}

/** Encodes one frame's planar values ([C, H, W], C = 1 or 3) as a grayscale or RGB PNG. */
export function encodeFramePng(planes: ArrayLike<number>, channels: 1 | 3, height: number, width: number): Buffer {
  return encodeInterleavedPng(interleaveFrame(planes, channels, height, width), channels, height, width);
}

function encodeInterleavedPng(data: Buffer, channels: 1 | 3, height: number, width: number): Buffer {
  const png = new PNG();
  png.width = width;
  png.height = height;
  png.data = data;
  // Same input and output colour type: pngjs packs the interleaved bytes as given, with no RGBA round trip.
  const colorType = channels === 1 ? 0 : 2;
  return PNG.sync.write(png, { colorType, inputColorType: colorType, inputHasAlpha: false });
}

export interface WriteVideoPngOptions {
  /** Also gets each frame's interleaved bytes ([H, W, C]), in order (e.g. for an animated preview). */
  onFrame?: (pixels: Uint8Array, channels: 1 | 3, index: number) => Promise<void> | void;
}

/**
 * Writes video [1, C, F, H, W] (C = 1 or 3, values in [-1, 1]) as PNGs: a single frame to outPath, several frames to
 * outPath's stem with a 4-digit index (out.png -> out-0000.png, out-0001.png, ...). Returns the paths written.
 */
export async function writeVideoPng(video: Tensor, outPath: string, options: WriteVideoPngOptions = {}): Promise<string[]> {
  const [b, c, f, h, w] = video.shape;
  if (video.ndim !== 5 || b !== 1 || (c !== 1 && c !== 3)) {
    throw new ShapeError(`writeVideoPng: video must be [1, C, F, H, W] with C = 1 or 3, got ${video.describe()}`);
  }
  if (f === 0 || h === 0 || w === 0) throw new ShapeError(`writeVideoPng: video ${video.describe()} is empty`);
  const paths = framePaths(outPath, f);
  for (let i = 0; i < f; i++) {
    const frame = video.narrow(2, i, 1);
    let values: ArrayLike<number>;
    try {
      values = await frame.toArray();
    } finally {
      frame.dispose();
    }
    const channels = c === 1 ? 1 : 3;
    const pixels = interleaveFrame(values, channels, h, w);
    await writeFile(paths[i], encodeInterleavedPng(pixels, channels, h, w));
    await options.onFrame?.(pixels, channels, i);
  }
  return paths;
}
