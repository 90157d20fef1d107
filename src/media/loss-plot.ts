// A training loss curve as a PNG: the raw per-step loss as a thin light line and its bias-corrected moving average
// as a thick dark one, on a gridded plot with tick labels, a legend and a title in the built-in 5x7 bitmap font
// (bitmap-font.ts). Everything is
// drawn here on an RGB raster; pngjs only encodes it, so no canvas or font library is needed.
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { formatTicks, niceTicks } from './axis-ticks.js';
import { drawText, GLYPH_H, textWidth } from './bitmap-font.js';
import { Raster, type Rgb } from './raster.js';

export type { Rgb };
export { niceTicks };

/** The plot's colours, exported so tests (and callers compositing the image) can find each element by colour. */
export const LOSS_PLOT_COLORS = {
  background: [255, 255, 255],
  grid: [232, 232, 232],
  frame: [150, 150, 150],
  text: [40, 40, 40],
  raw: [168, 200, 232],
  smoothed: [24, 72, 144],
} as const satisfies Record<string, Rgb>;

export interface LossPlotOptions {
  /** Image width in pixels (default 800). */
  width?: number;
  /** Image height in pixels (default 480). */
  height?: number;
  /** Drawn centred above the plot (default "loss"). */
  title?: string;
  /** EMA weight of the previous value, in [0, 1) (default 0.9, as TensorBoard's slider). 0 draws the raw loss. */
  smoothing?: number;
}

// ---------------------------------------------------------------------------------------------------------------
// Smoothing

/**
 * TensorBoard's smoothing: an exponential moving average divided by (1 - smoothing^n) after n finite values, so the
 * start is not dragged towards zero. Non-finite losses stay NaN and leave the average untouched.
 */
export function smoothLosses(losses: readonly number[], smoothing: number): number[] {
  let average = 0;
  let seen = 0;
  return losses.map((v) => {
    if (!Number.isFinite(v)) return NaN;
    average = average * smoothing + (1 - smoothing) * v;
    seen++;
    return average / (1 - smoothing ** seen);
  });
}

// ---------------------------------------------------------------------------------------------------------------
// The plot

/** The plot area's pixel bounds, all inclusive, and the data range they show. */
export interface PlotArea {
  left: number;
  top: number;
  right: number;
  bottom: number;
  x: readonly [number, number];
  y: readonly [number, number];
}

/** The loss axis: the finite values' range with 5% padding; equal values get a unit range, none gets [0, 1]. */
function lossRange(losses: readonly number[]): [number, number] {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of losses) {
    if (!Number.isFinite(v)) continue;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (lo > hi) return [0, 1];
  if (lo === hi) return [lo - 0.5, hi + 0.5];
  const pad = (hi - lo) * 0.05;
  return [lo - pad, hi + pad];
}

/** The step axis: 1..N edge to edge; one step sits in the middle; no steps still gets an axis. */
function stepRange(n: number): [number, number] {
  if (n === 0) return [1, 2];
  if (n === 1) return [0.5, 1.5];
  return [1, n];
}

function toPixelX(area: PlotArea, step: number): number {
  return area.left + ((step - area.x[0]) / (area.x[1] - area.x[0])) * (area.right - area.left);
}

function toPixelY(area: PlotArea, loss: number): number {
  return area.bottom - ((loss - area.y[0]) / (area.y[1] - area.y[0])) * (area.bottom - area.top);
}

/** One series as a polyline over steps 1..N, broken at non-finite values; a point with no finite neighbour is a dot. */
function drawSeries(r: Raster, area: PlotArea, values: readonly number[], color: Rgb, thickness: number, dotSize: number): void {
  const finite = (i: number): boolean => i >= 0 && i < values.length && Number.isFinite(values[i]);
  for (let i = 0; i < values.length; i++) {
    if (!finite(i)) continue;
    const x = toPixelX(area, i + 1);
    const y = toPixelY(area, values[i]);
    if (finite(i + 1)) r.line(x, y, toPixelX(area, i + 2), toPixelY(area, values[i + 1]), color, thickness);
    else if (!finite(i - 1)) r.dot(x, y, color, dotSize);
  }
}

function validateOptions(options: LossPlotOptions): Required<LossPlotOptions> {
  const { width = 800, height = 480, title = 'loss', smoothing = 0.9 } = options;
  for (const [name, v] of [
    ['width', width],
    ['height', height],
  ] as const) {
    if (!Number.isInteger(v) || v < 1 || v > 16384) throw new RangeError(`renderLossPlot: ${name} must be an integer in [1, 16384], got ${v}`);
  }
  if (!(smoothing >= 0 && smoothing < 1)) throw new RangeError(`renderLossPlot: smoothing must be in [0, 1), got ${smoothing}`);
  return { width, height, title, smoothing };
}

/** A legend entry: a short line in the series' colour and width, then its label. */
interface LegendEntry {
  label: string;
  color: Rgb;
  thickness: number;
}

/** The legend box's pixel bounds, all inclusive. */
export interface LegendBox {
  left: number;
  top: number;
  right: number;
  bottom: number;
}

/** Where renderLossPlot draws things, for tests and callers compositing the image. */
export interface LossPlotLayout {
  /** The plot area inside the frame (inclusive pixel bounds) and the step and loss ranges it shows. */
  area: PlotArea;
  /** The legend (undefined when there are fewer than two finite losses: no lines to tell apart). */
  legend?: LegendBox;
  /** The legend's entries, top to bottom: the raw loss, then its moving average when smoothing is above 0. */
  legendLabels: string[];
}

interface PlotGeometry extends LossPlotLayout {
  scale: number;
  titleScale: number;
  pad: number;
  tickLen: number;
  lineH: number;
  xTicks: number[];
  yTicks: number[];
  entries: LegendEntry[];
}

/** The legend's entries: raw and smoothed when smoothing draws two lines, else the one line as "loss". */
function legendEntries(smoothing: number, scale: number): LegendEntry[] {
  const colors = LOSS_PLOT_COLORS;
  if (smoothing === 0) return [{ label: 'loss', color: colors.smoothed, thickness: scale + 1 }];
  return [
    { label: 'loss', color: colors.raw, thickness: 1 },
    { label: `smoothed (EMA ${smoothing})`, color: colors.smoothed, thickness: scale + 1 },
  ];
}

/**
 * The legend's corner: the first of top-right, top-left, bottom-right, bottom-left (matplotlib's 'best' order,
 * roughly) whose box the curves' points cross least, so it hides as little of them as it can.
 */
function placeLegend(area: PlotArea, losses: readonly number[], smoothed: readonly number[], w: number, h: number, inset: number): LegendBox {
  const corners: LegendBox[] = [
    { left: area.right - inset - w + 1, top: area.top + inset, right: area.right - inset, bottom: area.top + inset + h - 1 },
    { left: area.left + inset, top: area.top + inset, right: area.left + inset + w - 1, bottom: area.top + inset + h - 1 },
    { left: area.right - inset - w + 1, top: area.bottom - inset - h + 1, right: area.right - inset, bottom: area.bottom - inset },
    { left: area.left + inset, top: area.bottom - inset - h + 1, right: area.left + inset + w - 1, bottom: area.bottom - inset },
  ];
  const covered = (box: LegendBox): number => {
    let n = 0;
    // Points along each segment, a few pixels apart, so a steep segment crossing the box counts too.
    for (const values of [losses, smoothed]) {
      for (let i = 0; i + 1 < values.length; i++) {
        if (!Number.isFinite(values[i]) || !Number.isFinite(values[i + 1])) continue;
        const x0 = toPixelX(area, i + 1);
        const y0 = toPixelY(area, values[i]);
        const x1 = toPixelX(area, i + 2);
        const y1 = toPixelY(area, values[i + 1]);
        const samples = Math.max(1, Math.ceil(Math.hypot(x1 - x0, y1 - y0) / 3));
        for (let k = 0; k < samples; k++) {
          const x = x0 + ((x1 - x0) * k) / samples;
          const y = y0 + ((y1 - y0) * k) / samples;
          if (x >= box.left - 2 && x <= box.right + 2 && y >= box.top - 2 && y <= box.bottom + 2) n++;
        }
      }
    }
    return n;
  };
  let best = corners[0];
  let bestCount = Infinity;
  for (const box of corners) {
    const n = covered(box);
    if (n < bestCount) [best, bestCount] = [box, n];
  }
  return best;
}

/** The plot's geometry: margins from the text sizes, the plot area, ticks and the legend's place. */
function layout(losses: readonly number[], width: number, height: number, smoothing: number): PlotGeometry {
  // Text, margins and line widths grow with the image so a large plot stays readable.
  const scale = Math.max(1, Math.floor(Math.min(width, height) / 240));
  const titleScale = scale + 1;
  const pad = 4 * scale;
  const tickLen = 3 * scale;
  const lineH = GLYPH_H * scale;

  const yRange = lossRange(losses);
  const xRange = stepRange(losses.length);
  const yTicks = niceTicks(yRange[0], yRange[1], 5);
  // Steps are whole numbers; with no steps at all there is nothing to number.
  const xTicks = losses.length === 0 ? [] : niceTicks(xRange[0], xRange[1], 5).filter(Number.isInteger);
  const yLabelW = Math.max(0, ...formatTicks(yTicks).map((l) => textWidth(l, scale)));
  const xLabelW = Math.max(0, ...formatTicks(xTicks).map((l) => textWidth(l, scale)));

  const left = pad + lineH + pad + yLabelW + pad + tickLen;
  const top = pad + GLYPH_H * titleScale + pad;
  const right = width - 1 - Math.max(2 * pad, Math.ceil(xLabelW / 2) + pad);
  const bottom = height - 1 - (tickLen + pad + lineH + pad + lineH + pad);
  const area: PlotArea = { left, top, right: Math.max(right, left + 1), bottom: Math.max(bottom, top + 1), x: xRange, y: yRange };

  const entries = legendEntries(smoothing, scale);
  let legend: LegendBox | undefined;
  if (losses.filter(Number.isFinite).length >= 2) {
    // Each row: pad, a swatch line as long as four glyphs, pad, the label, pad; rows lineH + pad apart.
    const swatch = 4 * (GLYPH_H - 2) * scale;
    const w = pad + swatch + pad + Math.max(...entries.map((e) => textWidth(e.label, scale))) + pad;
    const h = pad + entries.length * (lineH + pad);
    // Only where it fits inside the plot area, with room left over for the curves.
    if (w + 2 * pad <= (area.right - area.left) / 2 && h + 2 * pad <= (area.bottom - area.top) / 2)
      legend = placeLegend(area, losses, smoothLosses(losses, smoothing), w, h, pad);
  }
  return { area, legend, legendLabels: legend ? entries.map((e) => e.label) : [], scale, titleScale, pad, tickLen, lineH, xTicks, yTicks, entries };
}

/** Where renderLossPlot would draw the plot area and the legend for these losses and options. */
export function lossPlotLayout(losses: readonly number[], options: LossPlotOptions = {}): LossPlotLayout {
  const { width, height, smoothing } = validateOptions(options);
  const { area, legend, legendLabels } = layout(losses, width, height, smoothing);
  return { area, legend, legendLabels };
}

/** The legend: a framed box on the background colour, one swatch line and label per series. */
function drawLegend(r: Raster, box: LegendBox, entries: readonly LegendEntry[], g: PlotGeometry): void {
  const colors = LOSS_PLOT_COLORS;
  r.fillRect(box.left, box.top, box.right - box.left + 1, box.bottom - box.top + 1, colors.background);
  r.strokeRect(box.left, box.top, box.right, box.bottom, colors.frame);
  const swatch = 4 * (GLYPH_H - 2) * g.scale;
  entries.forEach((e, i) => {
    const rowTop = box.top + g.pad + i * (g.lineH + g.pad);
    const midY = rowTop + Math.floor(g.lineH / 2);
    const x0 = box.left + g.pad;
    // The brush is round: inset the ends by its radius so the swatch stays inside its slot.
    const inset = Math.floor(e.thickness / 2);
    r.line(x0 + inset, midY, x0 + swatch - 1 - inset, midY, e.color, e.thickness);
    drawText(r, e.label, x0 + swatch + g.pad, rowTop, g.scale, colors.text);
  });
}

/**
 * Renders a loss curve as PNG bytes: step (1..N) across, loss up, the raw loss as a thin light line and its
 * bias-corrected EMA as a thick dark one, with a legend naming both in the corner the curves leave freest.
 * Non-finite losses are skipped, breaking both lines there.
 */
export function renderLossPlot(losses: readonly number[], options: LossPlotOptions = {}): Buffer {
  const { width, height, title, smoothing } = validateOptions(options);
  const colors = LOSS_PLOT_COLORS;
  const r = new Raster(width, height, colors.background);
  const g = layout(losses, width, height, smoothing);
  const { area, scale, titleScale, pad, tickLen, lineH, xTicks, yTicks } = g;
  const yLabels = formatTicks(yTicks);
  const xLabels = formatTicks(xTicks);

  for (const t of yTicks) r.line(area.left, toPixelY(area, t), area.right, toPixelY(area, t), colors.grid);
  for (const t of xTicks) r.line(toPixelX(area, t), area.top, toPixelX(area, t), area.bottom, colors.grid);

  drawSeries(r, area, losses, colors.raw, 1, scale + 2);
  drawSeries(r, area, smoothLosses(losses, smoothing), colors.smoothed, scale + 1, 2 * scale + 3);
  if (!losses.some(Number.isFinite)) {
    const note = 'no data';
    drawText(r, note, Math.round((area.left + area.right - textWidth(note, scale)) / 2), Math.round((area.top + area.bottom - lineH) / 2), scale, colors.text);
  }
  if (g.legend) drawLegend(r, g.legend, g.entries, g);

  r.strokeRect(area.left, area.top, area.right, area.bottom, colors.frame);
  yTicks.forEach((t, i) => {
    const y = Math.round(toPixelY(area, t));
    r.line(area.left - tickLen, y, area.left - 1, y, colors.frame);
    drawText(r, yLabels[i], area.left - tickLen - pad - textWidth(yLabels[i], scale), y - Math.floor(lineH / 2), scale, colors.text);
  });
  xTicks.forEach((t, i) => {
    const x = Math.round(toPixelX(area, t));
    r.line(x, area.bottom + 1, x, area.bottom + tickLen, colors.frame);
    drawText(r, xLabels[i], x - Math.floor(textWidth(xLabels[i], scale) / 2), area.bottom + tickLen + pad, scale, colors.text);
  });

  const midX = (area.left + area.right) / 2;
  const midY = (area.top + area.bottom) / 2;
  drawText(r, 'step', Math.round(midX - textWidth('step', scale) / 2), area.bottom + tickLen + pad + lineH + pad, scale, colors.text);
  drawText(r, 'loss', pad, Math.round(midY + textWidth('loss', scale) / 2), scale, colors.text, true);
  drawText(r, title, Math.round(midX - textWidth(title, titleScale) / 2), pad, titleScale, colors.text);
  return r.toPng();
}

/** Writes renderLossPlot's PNG to `path`, creating its parent directory. */
export async function writeLossPlot(path: string, losses: readonly number[], options: LossPlotOptions = {}): Promise<void> {
  const png = renderLossPlot(losses, options);
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, png);
}
