// A spectrogram (or any [rows, cols] grid of values) as a PNG heat map: time across, row 0 (the lowest frequency or
// mel bin) at the bottom as in librosa's specshow, values mapped linearly through a perceptual colormap, optionally
// framed by axes with round tick values and titles (seconds across, Hz or mel bin up) in the built-in bitmap font.
// The pixels are computed here; pngjs only encodes them, as for the loss plot.
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { ShapeError } from '../core/errors.js';
import { formatTicks, niceTicks } from './axis-ticks.js';
import { ADVANCE, drawText, GLYPH_H, textWidth } from './bitmap-font.js';
import { Raster, type Rgb } from './raster.js';

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
  /**
   * Axes on the left and bottom of the heat map, with tick marks, round tick values and a title each, on a white
   * margin that makes the image larger than cols*scale x rows*scale (spectrogramLayout gives the size and where the
   * heat map sits; its pixels are the same as without axes). Default none: the bare heat map.
   */
  axes?: SpectrogramAxes;
}

/** One axis: the value at the centre of column (or row) i is start + i * step. */
export interface SpectrogramAxis {
  /** Title, e.g. 'time (s)', 'frequency (Hz)', 'mel bin'. */
  label: string;
  /** Value at the centre of column or row 0 (default 0). */
  start?: number;
  /** Value per column or row, positive and finite: hop / sample rate for time, sample rate / n_fft for an STFT bin. */
  step: number;
}

export interface SpectrogramAxes {
  /** Across, over columns (time frames). */
  x: SpectrogramAxis;
  /** Up, over rows (frequency or mel bins), row 0 at the bottom. */
  y: SpectrogramAxis;
}

/** The axes' colours: the margin, the axis lines and tick marks, and the labels. */
export const SPECTROGRAM_AXIS_COLORS = {
  background: [255, 255, 255],
  axis: [90, 90, 90],
  text: [40, 40, 40],
} as const satisfies Record<string, Rgb>;

/** Where spectrogramPng puts things: the image size and the heat map's top-left corner and size, in pixels. */
export interface SpectrogramLayout {
  width: number;
  height: number;
  /** The heat map: cols*scale x rows*scale pixels with its top-left corner at (left, top). */
  map: { left: number; top: number; width: number; height: number };
  /** Font pixel size of the labels. */
  textScale: number;
  /** The ticks drawn on each axis, as values, with their pixel column (x) or row (y) and label. */
  xTicks: { value: number; pixel: number; label: string }[];
  yTicks: { value: number; pixel: number; label: string }[];
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
 * Ticks for an axis of `n` cells of `cellPx` pixels each: round values within the cells' centres, as many as fit
 * with labels `gap` pixels apart (`size` measures a label along the axis). pixel(i) is where cell i's centre is.
 */
function axisTicks(
  axis: SpectrogramAxis,
  n: number,
  lengthPx: number,
  size: (label: string) => number,
  gap: number,
  pixel: (cell: number) => number,
): { value: number; pixel: number; label: string }[] {
  const start = axis.start ?? 0;
  const end = start + (n - 1) * axis.step;
  for (let count = Math.max(2, Math.floor(lengthPx / 40)); count >= 1; count--) {
    const values = niceTicks(start, end, count);
    const labels = formatTicks(values);
    const ticks = values.map((value, i) => ({ value, pixel: Math.floor(pixel((value - start) / axis.step) + 1e-9), label: labels[i] }));
    // Neighbouring labels, centred on their ticks, must not touch.
    const fits = ticks.every((t, i) => i === 0 || Math.abs(t.pixel - ticks[i - 1].pixel) >= (size(t.label) + size(ticks[i - 1].label)) / 2 + gap);
    if (fits || count === 1) return ticks;
  }
  return [];
}

function validateAxis(name: string, axis: SpectrogramAxis): void {
  if (!(axis.step > 0 && Number.isFinite(axis.step))) throw new RangeError(`spectrogramPng: axes.${name}.step must be positive and finite, got ${axis.step}`);
  if (axis.start !== undefined && !Number.isFinite(axis.start)) throw new RangeError(`spectrogramPng: axes.${name}.start must be finite, got ${axis.start}`);
}

/**
 * The image spectrogramPng draws for a rows x cols grid: without axes the heat map alone; with them a margin of
 * left = pad + text + pad + widest y label + pad + tick, bottom = tick + pad + text + pad + text + pad, top and
 * right = enough for the last tick labels to overhang, where text is 7 * textScale pixels, pad 3 * textScale and
 * tick 4 * textScale, and textScale 1 below 480 pixels on the heat map's shorter side (then one more per 240).
 */
export function spectrogramLayout(rows: number, cols: number, options: Pick<SpectrogramPngOptions, 'scale' | 'axes'> = {}): SpectrogramLayout {
  const scale = options.scale ?? 1;
  const mapW = cols * scale;
  const mapH = rows * scale;
  const axes = options.axes;
  if (!axes) return { width: mapW, height: mapH, map: { left: 0, top: 0, width: mapW, height: mapH }, textScale: 1, xTicks: [], yTicks: [] };
  validateAxis('x', axes.x);
  validateAxis('y', axes.y);
  const textScale = Math.max(1, Math.floor(Math.min(mapW, mapH) / 240));
  const text = GLYPH_H * textScale;
  const pad = 3 * textScale;
  const tick = 4 * textScale;
  // Positions first relative to the map's top-left corner; labels' widths then set the margins.
  const xTicks = axisTicks(
    axes.x,
    cols,
    mapW,
    (l) => textWidth(l, textScale),
    2 * ADVANCE * textScale,
    (c) => c * scale + (scale - 1) / 2,
  );
  const yTicks = axisTicks(
    axes.y,
    rows,
    mapH,
    () => text,
    pad,
    (r) => mapH - 1 - (r * scale + (scale - 1) / 2),
  );
  const yLabelW = Math.max(0, ...yTicks.map((t) => textWidth(t.label, textScale)));
  const left = pad + text + pad + yLabelW + pad + tick;
  const top = Math.max(pad, Math.ceil(text / 2) - Math.min(mapH, ...yTicks.map((t) => t.pixel)) + 1);
  const overhang = Math.max(0, ...xTicks.map((t) => t.pixel + Math.ceil(textWidth(t.label, textScale) / 2) - (mapW - 1)));
  const right = Math.max(pad, overhang + 1);
  const bottom = tick + pad + text + pad + text + pad;
  return {
    width: left + mapW + right,
    height: top + mapH + bottom,
    map: { left, top, width: mapW, height: mapH },
    textScale,
    xTicks: xTicks.map((t) => ({ ...t, pixel: t.pixel + left })),
    yTicks: yTicks.map((t) => ({ ...t, pixel: t.pixel + top })),
  };
}

/** Draws the axis lines (one pixel outside the heat map), tick marks, tick labels and titles. */
function drawAxes(r: Raster, l: SpectrogramLayout, axes: SpectrogramAxes): void {
  const colors = SPECTROGRAM_AXIS_COLORS;
  const s = l.textScale;
  const text = GLYPH_H * s;
  const pad = 3 * s;
  const tick = 4 * s;
  const { left, top, width, height } = l.map;
  const axisX = left - 1;
  const axisY = top + height;
  r.fillRect(axisX, top, 1, height + 1, colors.axis);
  r.fillRect(axisX, axisY, width + 1, 1, colors.axis);
  for (const t of l.xTicks) {
    r.fillRect(t.pixel, axisY + 1, 1, tick, colors.axis);
    drawText(r, t.label, t.pixel - Math.floor(textWidth(t.label, s) / 2), axisY + 1 + tick + pad, s, colors.text);
  }
  for (const t of l.yTicks) {
    r.fillRect(axisX - tick, t.pixel, tick, 1, colors.axis);
    drawText(r, t.label, axisX - tick - pad - textWidth(t.label, s), t.pixel - Math.floor(text / 2), s, colors.text);
  }
  const midX = left + Math.floor(width / 2);
  const midY = top + Math.floor(height / 2);
  drawText(r, axes.x.label, midX - Math.floor(textWidth(axes.x.label, s) / 2), axisY + 1 + tick + pad + text + pad, s, colors.text);
  drawText(r, axes.y.label, pad, midY + Math.floor(textWidth(axes.y.label, s) / 2), s, colors.text, true);
}

/**
 * Renders `values` (row-major [rows, cols]: value (r, c) at values[r * cols + c], rows = frequency or mel bins,
 * cols = time frames) as an RGB PNG whose heat map is cols*scale x rows*scale pixels, row 0 at the bottom (the whole
 * image when there are no axes; see spectrogramLayout). [min, max] maps linearly onto the colormap, values outside
 * clamp to its ends, +-Infinity included; NaN is black. When min equals max (constant data, say), values above it
 * take the last color and the rest the first.
 */
export function spectrogramPng(values: Float32Array, rows: number, cols: number, options: SpectrogramPngOptions = {}): Buffer {
  const { scale, anchors, min, max } = validate(values, rows, cols, options);
  const layout = spectrogramLayout(rows, cols, options);
  const { width, height } = layout;
  const raster = new Raster(width, height, SPECTROGRAM_AXIS_COLORS.background);
  const data = raster.data;
  const span = max - min;
  const rowBytes = width * 3;
  const line = Buffer.alloc(cols * scale * 3);
  const mapLeft = layout.map.left * 3;
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
    const top = layout.map.top + (rows - 1 - r) * scale;
    for (let k = 0; k < scale; k++) line.copy(data, (top + k) * rowBytes + mapLeft);
  }
  if (options.axes) drawAxes(raster, layout, options.axes);
  return raster.toPng();
}

/** Writes spectrogramPng's image to `path`, creating its parent directory. */
export async function writeSpectrogramPng(path: string, values: Float32Array, rows: number, cols: number, options: SpectrogramPngOptions = {}): Promise<void> {
  const png = spectrogramPng(values, rows, cols, options);
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, png);
}
