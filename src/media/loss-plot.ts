// A training loss curve as a PNG: the raw per-step loss as a thin light line and its bias-corrected moving average
// as a thick dark one, on a gridded plot with tick labels and a title in a built-in 5x7 bitmap font. Everything is
// drawn here on an RGB raster; pngjs only encodes it, so no canvas or font library is needed.
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { PNG } from 'pngjs';

export type Rgb = readonly [number, number, number];

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
// Raster

/** An RGB image with clipped drawing primitives: pixels outside the image are dropped, never wrapped. */
class Raster {
  readonly data: Buffer;

  constructor(
    readonly width: number,
    readonly height: number,
    background: Rgb,
  ) {
    this.data = Buffer.alloc(width * height * 3);
    this.fillRect(0, 0, width, height, background);
  }

  setPixel(x: number, y: number, color: Rgb): void {
    if (x < 0 || y < 0 || x >= this.width || y >= this.height) return;
    const i = (y * this.width + x) * 3;
    this.data[i] = color[0];
    this.data[i + 1] = color[1];
    this.data[i + 2] = color[2];
  }

  fillRect(x: number, y: number, w: number, h: number, color: Rgb): void {
    const x0 = Math.max(0, x);
    const y0 = Math.max(0, y);
    const x1 = Math.min(this.width, x + w);
    const y1 = Math.min(this.height, y + h);
    for (let py = y0; py < y1; py++) for (let px = x0; px < x1; px++) this.setPixel(px, py, color);
  }

  /** A filled disc of the given diameter centred on (x, y); diameter 1 is a single pixel. */
  dot(x: number, y: number, color: Rgb, diameter = 1): void {
    const cx = Math.round(x);
    const cy = Math.round(y);
    if (diameter <= 1) return this.setPixel(cx, cy, color);
    const r = diameter / 2;
    const reach = Math.floor(r);
    for (let dy = -reach; dy <= reach; dy++) {
      for (let dx = -reach; dx <= reach; dx++) if (dx * dx + dy * dy <= r * r) this.setPixel(cx + dx, cy + dy, color);
    }
  }

  /** A Bresenham line stamped with a round brush of the given thickness. */
  line(x0: number, y0: number, x1: number, y1: number, color: Rgb, thickness = 1): void {
    // Non-finite or far-off endpoints can only come from a degenerate value range; skip rather than loop for ages.
    const limit = 4 * Math.max(this.width, this.height);
    for (const v of [x0, y0, x1, y1]) if (!Number.isFinite(v) || Math.abs(v) > limit) return;
    let x = Math.round(x0);
    let y = Math.round(y0);
    const xe = Math.round(x1);
    const ye = Math.round(y1);
    const dx = Math.abs(xe - x);
    const dy = -Math.abs(ye - y);
    const sx = x < xe ? 1 : -1;
    const sy = y < ye ? 1 : -1;
    let err = dx + dy;
    for (;;) {
      this.dot(x, y, color, thickness);
      if (x === xe && y === ye) return;
      const e2 = 2 * err;
      if (e2 >= dy) {
        err += dy;
        x += sx;
      }
      if (e2 <= dx) {
        err += dx;
        y += sy;
      }
    }
  }

  /** A one-pixel outline of the rectangle with corners (x0, y0) and (x1, y1), both inclusive. */
  strokeRect(x0: number, y0: number, x1: number, y1: number, color: Rgb): void {
    this.line(x0, y0, x1, y0, color);
    this.line(x1, y0, x1, y1, color);
    this.line(x1, y1, x0, y1, color);
    this.line(x0, y1, x0, y0, color);
  }

  toPng(): Buffer {
    const png = new PNG({ width: this.width, height: this.height });
    png.data = this.data;
    // RGB in and out: pngjs packs the bytes as given, with no RGBA round trip.
    return PNG.sync.write(png, { colorType: 2, inputColorType: 2, inputHasAlpha: false });
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Font

const GLYPH_W = 5;
const GLYPH_H = 7;
const ADVANCE = GLYPH_W + 1;

// Seven rows of five columns each, '#' = ink. Enough for numbers (fixed and exponential), the axis labels and
// ordinary titles; anything else is drawn as a box so a missing glyph is visible rather than silently dropped.
const GLYPH_ROWS: Record<string, string> = {
  '0': '.###. #...# #..## #.#.# ##..# #...# .###.',
  '1': '..#.. .##.. ..#.. ..#.. ..#.. ..#.. .###.',
  '2': '.###. #...# ....# ...#. ..#.. .#... #####',
  '3': '##### ...#. ..#.. ...#. ....# #...# .###.',
  '4': '...#. ..##. .#.#. #..#. ##### ...#. ...#.',
  '5': '##### #.... ####. ....# ....# #...# .###.',
  '6': '..##. .#... #.... ####. #...# #...# .###.',
  '7': '##### ....# ...#. ..#.. .#... .#... .#...',
  '8': '.###. #...# #...# .###. #...# #...# .###.',
  '9': '.###. #...# #...# .#### ....# ...#. .##..',
  ' ': '..... ..... ..... ..... ..... ..... .....',
  '.': '..... ..... ..... ..... ..... .##.. .##..',
  ',': '..... ..... ..... ..... .##.. ..#.. .#...',
  ':': '..... .##.. .##.. ..... .##.. .##.. .....',
  '-': '..... ..... ..... .###. ..... ..... .....',
  '+': '..... ..#.. ..#.. ##### ..#.. ..#.. .....',
  '=': '..... ..... ##### ..... ##### ..... .....',
  _: '..... ..... ..... ..... ..... ..... #####',
  '/': '..... ....# ...#. ..#.. .#... #.... .....',
  '%': '##... ##..# ...#. ..#.. .#... #..## ...##',
  '(': '...#. ..#.. .#... .#... .#... ..#.. ...#.',
  ')': '.#... ..#.. ...#. ...#. ...#. ..#.. .#...',
  '[': '.###. .#... .#... .#... .#... .#... .###.',
  ']': '.###. ...#. ...#. ...#. ...#. ...#. .###.',
  A: '.###. #...# #...# ##### #...# #...# #...#',
  B: '####. #...# #...# ####. #...# #...# ####.',
  C: '.###. #...# #.... #.... #.... #...# .###.',
  D: '###.. #..#. #...# #...# #...# #..#. ###..',
  E: '##### #.... #.... ####. #.... #.... #####',
  F: '##### #.... #.... ####. #.... #.... #....',
  G: '.###. #...# #.... #.### #...# #...# .####',
  H: '#...# #...# #...# ##### #...# #...# #...#',
  I: '.###. ..#.. ..#.. ..#.. ..#.. ..#.. .###.',
  J: '..### ...#. ...#. ...#. ...#. #..#. .##..',
  K: '#...# #..#. #.#.. ##... #.#.. #..#. #...#',
  L: '#.... #.... #.... #.... #.... #.... #####',
  M: '#...# ##.## #.#.# #.#.# #...# #...# #...#',
  N: '#...# #...# ##..# #.#.# #..## #...# #...#',
  O: '.###. #...# #...# #...# #...# #...# .###.',
  P: '####. #...# #...# ####. #.... #.... #....',
  Q: '.###. #...# #...# #...# #.#.# #..#. .##.#',
  R: '####. #...# #...# ####. #.#.. #..#. #...#',
  S: '.#### #.... #.... .###. ....# ....# ####.',
  T: '##### ..#.. ..#.. ..#.. ..#.. ..#.. ..#..',
  U: '#...# #...# #...# #...# #...# #...# .###.',
  V: '#...# #...# #...# #...# #...# .#.#. ..#..',
  W: '#...# #...# #...# #.#.# #.#.# #.#.# .#.#.',
  X: '#...# #...# .#.#. ..#.. .#.#. #...# #...#',
  Y: '#...# #...# .#.#. ..#.. ..#.. ..#.. ..#..',
  Z: '##### ....# ...#. ..#.. .#... #.... #####',
  a: '..... ..... .###. ....# .#### #...# .####',
  b: '#.... #.... #.##. ##..# #...# #...# ####.',
  c: '..... ..... .###. #.... #.... #...# .###.',
  d: '....# ....# .##.# #..## #...# #...# .####',
  e: '..... ..... .###. #...# ##### #.... .###.',
  f: '..##. .#..# .#... ###.. .#... .#... .#...',
  g: '..... .#### #...# #...# .#### ....# .###.',
  h: '#.... #.... #.##. ##..# #...# #...# #...#',
  i: '..#.. ..... .##.. ..#.. ..#.. ..#.. .###.',
  j: '...#. ..... ..##. ...#. ...#. #..#. .##..',
  k: '#.... #.... #..#. #.#.. ##... #.#.. #..#.',
  l: '.##.. ..#.. ..#.. ..#.. ..#.. ..#.. .###.',
  m: '..... ..... ##.#. #.#.# #.#.# #...# #...#',
  n: '..... ..... #.##. ##..# #...# #...# #...#',
  o: '..... ..... .###. #...# #...# #...# .###.',
  p: '..... ..... ####. #...# ####. #.... #....',
  q: '..... ..... .##.# #..## .#### ....# ....#',
  r: '..... ..... #.##. ##..# #.... #.... #....',
  s: '..... ..... .###. #.... .###. ....# ####.',
  t: '.#... .#... ###.. .#... .#... .#..# ..##.',
  u: '..... ..... #...# #...# #...# #..## .##.#',
  v: '..... ..... #...# #...# #...# .#.#. ..#..',
  w: '..... ..... #...# #...# #.#.# #.#.# .#.#.',
  x: '..... ..... #...# .#.#. ..#.. .#.#. #...#',
  y: '..... ..... #...# #...# .#### ....# .###.',
  z: '..... ..... ##### ...#. ..#.. .#... #####',
};

/** Each glyph as GLYPH_H row bitmasks, bit (GLYPH_W - 1 - col) set where column col has ink. */
const GLYPHS: ReadonlyMap<string, readonly number[]> = new Map(Object.entries(GLYPH_ROWS).map(([ch, rows]) => [ch, parseGlyph(ch, rows)]));

function parseGlyph(ch: string, rows: string): number[] {
  const lines = rows.split(' ');
  if (lines.length !== GLYPH_H || lines.some((l) => l.length !== GLYPH_W)) {
    throw new Error(`loss-plot font: glyph ${JSON.stringify(ch)} is not ${GLYPH_W}x${GLYPH_H}`);
  }
  return lines.map((l) => [...l].reduce((bits, c) => (bits << 1) | (c === '#' ? 1 : 0), 0));
}

// The outline drawn for characters the font lacks.
const MISSING_GLYPH = parseGlyph('?', '##### #...# #...# #...# #...# #...# #####');

/** Width in pixels of `text` drawn at `scale` (no trailing gap). */
function textWidth(text: string, scale: number): number {
  const n = [...text].length;
  return n === 0 ? 0 : (n * ADVANCE - 1) * scale;
}

/**
 * Draws `text` with its top-left corner at (x, y), each font pixel a scale x scale block. `vertical` turns it 90
 * degrees counter-clockwise (reading bottom to top, as a y-axis label), with (x, y) then its bottom-left corner.
 */
function drawText(r: Raster, text: string, x: number, y: number, scale: number, color: Rgb, vertical = false): void {
  [...text].forEach((ch, i) => {
    const rows = GLYPHS.get(ch) ?? MISSING_GLYPH;
    for (let gy = 0; gy < GLYPH_H; gy++) {
      for (let gx = 0; gx < GLYPH_W; gx++) {
        if (!((rows[gy] >> (GLYPH_W - 1 - gx)) & 1)) continue;
        const along = (i * ADVANCE + gx) * scale;
        const across = gy * scale;
        if (vertical) r.fillRect(x + across, y - along - scale, scale, scale, color);
        else r.fillRect(x + along, y + across, scale, scale, color);
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Axis ticks

/**
 * About `count` round tick values (1, 2 or 5 x 10^k apart) lying within [min, max], in increasing order; the
 * bounds may come in either order. min == max gives that single value; a non-finite bound gives none.
 */
export function niceTicks(min: number, max: number, count: number): number[] {
  if (!Number.isFinite(min) || !Number.isFinite(max)) return [];
  if (min > max) [min, max] = [max, min];
  if (min === max) return [min];
  const step = tickStep(max - min, Math.max(1, Math.round(count)));
  // Small steps divide by their (integral) inverse so 0.1-spaced ticks come out as 0.3, not 0.30000000000000004.
  const inverse = step < 1 ? Math.round(1 / step) : 0;
  const at = (k: number): number => (inverse ? k / inverse : k * step) + 0; // + 0 turns -0 into 0
  const first = Math.ceil(min / step - 1e-9);
  const last = Math.floor(max / step + 1e-9);
  const ticks: number[] = [];
  for (let k = first; k <= last; k++) ticks.push(at(k));
  return ticks;
}

/** The 1/2/5 x 10^k step nearest to span / count (the same thresholds as d3's ticks: sqrt 50, sqrt 10, sqrt 2). */
function tickStep(span: number, count: number): number {
  const raw = span / count;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const norm = raw / magnitude;
  const factor = norm >= Math.sqrt(50) ? 10 : norm >= Math.sqrt(10) ? 5 : norm >= Math.sqrt(2) ? 2 : 1;
  return factor * magnitude;
}

/**
 * Labels for one axis's ticks, all in one notation: fixed with as many decimals as the spacing needs, or
 * exponential (2.5e-5, 1e+6) when fixed would be too long to read.
 */
function formatTicks(ticks: readonly number[]): string[] {
  if (ticks.length === 0) return [];
  const spacing = ticks.length > 1 ? Math.abs(ticks[1] - ticks[0]) : 0;
  const largest = Math.max(...ticks.map(Math.abs));
  const exponential = largest >= 1e6 || (spacing > 0 && spacing < 1e-4) || (spacing === 0 && largest > 0 && largest < 1e-4);
  if (exponential) {
    const digits = (v: number): number =>
      spacing > 0 && v !== 0 ? Math.min(6, Math.max(0, Math.floor(Math.log10(Math.abs(v))) - Math.floor(Math.log10(spacing) + 1e-9))) : 0;
    // toExponential pads with zeros (2.50e-5); strip them so labels stay short.
    return ticks.map((v) => v.toExponential(digits(v)).replace(/\.?0+e/, 'e'));
  }
  const reference = spacing > 0 ? spacing : largest;
  const decimals = reference > 0 ? Math.max(0, -Math.floor(Math.log10(reference) + 1e-9)) : 0;
  return ticks.map((v) => v.toFixed(decimals));
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
interface PlotArea {
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

/**
 * Renders a loss curve as PNG bytes: step (1..N) across, loss up, the raw loss as a thin light line and its
 * bias-corrected EMA as a thick dark one. Non-finite losses are skipped, breaking both lines there.
 */
export function renderLossPlot(losses: readonly number[], options: LossPlotOptions = {}): Buffer {
  const { width, height, title, smoothing } = validateOptions(options);
  const colors = LOSS_PLOT_COLORS;
  const r = new Raster(width, height, colors.background);

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
  const yLabels = formatTicks(yTicks);
  const xLabels = formatTicks(xTicks);
  const yLabelW = Math.max(0, ...yLabels.map((l) => textWidth(l, scale)));
  const xLabelW = Math.max(0, ...xLabels.map((l) => textWidth(l, scale)));

  const left = pad + lineH + pad + yLabelW + pad + tickLen;
  const top = pad + GLYPH_H * titleScale + pad;
  const right = width - 1 - Math.max(2 * pad, Math.ceil(xLabelW / 2) + pad);
  const bottom = height - 1 - (tickLen + pad + lineH + pad + lineH + pad);
  const area: PlotArea = { left, top, right: Math.max(right, left + 1), bottom: Math.max(bottom, top + 1), x: xRange, y: yRange };

  for (const t of yTicks) r.line(area.left, toPixelY(area, t), area.right, toPixelY(area, t), colors.grid);
  for (const t of xTicks) r.line(toPixelX(area, t), area.top, toPixelX(area, t), area.bottom, colors.grid);

  drawSeries(r, area, losses, colors.raw, 1, scale + 2);
  drawSeries(r, area, smoothLosses(losses, smoothing), colors.smoothed, scale + 1, 2 * scale + 3);
  if (!losses.some(Number.isFinite)) {
    const note = 'no data';
    drawText(r, note, Math.round((area.left + area.right - textWidth(note, scale)) / 2), Math.round((area.top + area.bottom - lineH) / 2), scale, colors.text);
  }

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
