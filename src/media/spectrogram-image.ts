// A spectrogram (or any [rows, cols] grid of values) as a PNG heat map: time across, row 0 (the lowest frequency or
// mel bin) at the bottom as in librosa's specshow, values mapped linearly through a perceptual colormap. The pixels
// are computed here; pngjs only encodes them, as for the loss plot.
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { PNG } from 'pngjs';
import { ShapeError } from '../core/errors.js';
import type { Rgb } from './loss-plot.js';

export type SpectrogramColormap = 'magma' | 'viridis';

export interface SpectrogramPngOptions {
  /** Value drawn as the colormap's first color; lower values clamp to it (default: the data's finite minimum). */
  min?: number;
  /** Value drawn as the colormap's last color; higher values clamp to it (default: the data's finite maximum). */
  max?: number;
  /** Default 'magma'. */
  colormap?: SpectrogramColormap;
  /** Each value becomes a scale x scale block of pixels (a positive integer, default 1). */
  scale?: number;
}

/**
 * 17 anchors per colormap, sampled at entries round(k * 255 / 16) of matplotlib's 256-entry magma and viridis tables
 * (matplotlib/_cm_listed.py) and rounded to bytes. Linear interpolation between them stays within a few levels of the
 * full tables, which keeps the maps perceptually uniform without carrying 256 entries each.
 */
export const SPECTROGRAM_COLORMAPS: Readonly<Record<SpectrogramColormap, readonly Rgb[]>> = {
  magma: [
    [0, 0, 4],
    [10, 8, 34],
    [29, 17, 71],
    [54, 16, 107],
    [81, 18, 124],
    [106, 28, 129],
    [131, 38, 129],
    [156, 46, 127],
    [183, 55, 121],
    [207, 64, 112],
    [229, 80, 100],
    [244, 105, 92],
    [251, 135, 97],
    [254, 165, 113],
    [254, 194, 135],
    [253, 224, 161],
    [252, 253, 191],
  ],
  viridis: [
    [68, 1, 84],
    [72, 24, 106],
    [71, 45, 123],
    [66, 64, 134],
    [59, 82, 139],
    [51, 99, 141],
    [44, 114, 142],
    [38, 130, 142],
    [33, 145, 140],
    [31, 159, 136],
    [39, 173, 129],
    [61, 188, 116],
    [92, 200, 99],
    [129, 211, 77],
    [170, 220, 50],
    [213, 226, 26],
    [253, 231, 37],
  ],
};

/** NaN has no place on the colormap; black sets it apart from both ends of magma and viridis. */
const NAN_COLOR: Rgb = [0, 0, 0];

/** The color at t in [0, 1] (clamped), interpolated linearly between the two nearest anchors. */
function colorAt(anchors: readonly Rgb[], t: number): Rgb {
  const pos = Math.min(1, Math.max(0, t)) * (anchors.length - 1);
  const i = Math.min(anchors.length - 2, Math.floor(pos));
  const f = pos - i;
  const a = anchors[i];
  const b = anchors[i + 1];
  return [Math.round(a[0] + (b[0] - a[0]) * f), Math.round(a[1] + (b[1] - a[1]) * f), Math.round(a[2] + (b[2] - a[2]) * f)];
}

function finiteRange(values: Float32Array): [number, number] | undefined {
  let lo = Infinity;
  let hi = -Infinity;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v < lo && v > -Infinity) lo = v;
    if (v > hi && v < Infinity) hi = v;
  }
  return lo <= hi ? [lo, hi] : undefined;
}

function validate(values: Float32Array, rows: number, cols: number, options: SpectrogramPngOptions) {
  if (!Number.isInteger(rows) || !Number.isInteger(cols) || rows < 1 || cols < 1) {
    throw new ShapeError(`spectrogramPng: rows and cols must be positive integers, got ${rows} x ${cols}`);
  }
  if (values.length !== rows * cols) {
    throw new ShapeError(`spectrogramPng: ${values.length} values do not fill ${rows} rows x ${cols} cols (${rows * cols})`);
  }
  const scale = options.scale ?? 1;
  if (!Number.isInteger(scale) || scale < 1) {
    throw new RangeError(`spectrogramPng: scale must be a positive integer, got ${scale}`);
  }
  const colormap = options.colormap ?? 'magma';
  if (!Object.hasOwn(SPECTROGRAM_COLORMAPS, colormap)) {
    throw new RangeError(`spectrogramPng: unknown colormap '${String(colormap)}' (magma or viridis)`);
  }
  for (const key of ['min', 'max'] as const) {
    const v = options[key];
    if (v !== undefined && !Number.isFinite(v)) throw new RangeError(`spectrogramPng: ${key} must be finite, got ${v}`);
  }
  if (options.min !== undefined && options.max !== undefined && options.min > options.max) {
    throw new RangeError(`spectrogramPng: min ${options.min} is above max ${options.max}`);
  }
  // A missing bound comes from the data, but never crosses a given one: min alone above all the data still draws.
  const data = finiteRange(values);
  let min = options.min ?? data?.[0] ?? options.max ?? 0;
  let max = options.max ?? data?.[1] ?? min;
  if (options.min === undefined) min = Math.min(min, max);
  else max = Math.max(min, max);
  return { scale, anchors: SPECTROGRAM_COLORMAPS[colormap], min, max };
}

/**
 * Renders `values` (row-major [rows, cols]: value (r, c) at values[r * cols + c], rows = frequency or mel bins,
 * cols = time frames) as an RGB PNG of cols*scale x rows*scale pixels, row 0 at the bottom. [min, max] maps
 * linearly onto the colormap, values outside clamp to its ends, +-Infinity included; NaN is black. When min equals
 * max (constant data, say), values above it take the last color and the rest the first.
 */
export function spectrogramPng(values: Float32Array, rows: number, cols: number, options: SpectrogramPngOptions = {}): Buffer {
  const { scale, anchors, min, max } = validate(values, rows, cols, options);
  const span = max - min;
  const width = cols * scale;
  const height = rows * scale;
  const rowBytes = width * 3;
  const data = Buffer.alloc(rowBytes * height);
  const line = Buffer.alloc(rowBytes);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const v = values[r * cols + c];
      const color = Number.isNaN(v) ? NAN_COLOR : colorAt(anchors, span > 0 ? (v - min) / span : v > min ? 1 : 0);
      for (let k = 0, p = c * scale * 3; k < scale; k++, p += 3) {
        line[p] = color[0];
        line[p + 1] = color[1];
        line[p + 2] = color[2];
      }
    }
    // Image rows run top to bottom, so data row r lands `rows - 1 - r` blocks down.
    const top = (rows - 1 - r) * scale;
    for (let k = 0; k < scale; k++) line.copy(data, (top + k) * rowBytes);
  }
  const png = new PNG({ width, height });
  png.data = data;
  // RGB in and out: pngjs packs the bytes as given, with no RGBA round trip.
  return PNG.sync.write(png, { colorType: 2, inputColorType: 2, inputHasAlpha: false });
}

/** Writes spectrogramPng's image to `path`, creating its parent directory. */
export async function writeSpectrogramPng(path: string, values: Float32Array, rows: number, cols: number, options: SpectrogramPngOptions = {}): Promise<void> {
  const png = spectrogramPng(values, rows, cols, options);
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, png);
}
