// renderLossPlot / writeLossPlot: the PNG decoded with pngjs and read by colour (background, raw line, EMA line),
// so the tests check what is drawn where, not just that encoding succeeds; niceTicks' round values on their own.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PNG } from 'pngjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOSS_PLOT_COLORS, lossPlotLayout, niceTicks, renderLossPlot, smoothLosses, writeLossPlot, type Rgb } from '../../src/media/loss-plot.js';

let dir = '';
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tensorgpu-loss-plot-'));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

function decode(png: Buffer): PNG {
  return PNG.sync.read(png);
}

function pixel(img: PNG, x: number, y: number): number[] {
  const i = (y * img.width + x) * 4;
  return [img.data[i], img.data[i + 1], img.data[i + 2]];
}

/** Every pixel of exactly `color`, as [x, y]. */
function pixelsOf(img: PNG, color: Rgb): [number, number][] {
  const found: [number, number][] = [];
  for (let y = 0; y < img.height; y++) {
    for (let x = 0; x < img.width; x++) {
      const [r, g, b] = pixel(img, x, y);
      if (r === color[0] && g === color[1] && b === color[2]) found.push([x, y]);
    }
  }
  return found;
}

function mean(values: number[]): number {
  return values.reduce((a, b) => a + b, 0) / values.length;
}

// Decreasing with a wobble, so raw and EMA lines differ.
const decreasing = Array.from({ length: 100 }, (_, i) => 3 * Math.exp(-i / 25) + 0.5 + 0.1 * Math.sin(i * 1.3));

describe('renderLossPlot', () => {
  it('is an 800x480 PNG by default, with a white background, and honours width and height', () => {
    const img = decode(renderLossPlot(decreasing));
    expect([img.width, img.height]).toEqual([800, 480]);
    for (const [x, y] of [
      [0, 0],
      [799, 0],
      [0, 479],
      [799, 479],
    ])
      expect(pixel(img, x, y)).toEqual([255, 255, 255]);
    const small = decode(renderLossPlot(decreasing, { width: 320, height: 200 }));
    expect([small.width, small.height]).toEqual([320, 200]);
  });

  it('draws both the raw line and the EMA line, with a grid and dark text', () => {
    const img = decode(renderLossPlot(decreasing));
    expect(pixelsOf(img, LOSS_PLOT_COLORS.smoothed).length).toBeGreaterThan(500);
    expect(pixelsOf(img, LOSS_PLOT_COLORS.raw).length).toBeGreaterThan(200);
    expect(pixelsOf(img, LOSS_PLOT_COLORS.grid).length).toBeGreaterThan(500);
    // Title and tick labels: text pixels, in the top band (title) and elsewhere.
    const text = pixelsOf(img, LOSS_PLOT_COLORS.text);
    expect(text.some(([, y]) => y < 30)).toBe(true);
    expect(text.length).toBeGreaterThan(300);
  });

  it('puts a decreasing curve high on the left and low on the right (smaller y is higher)', () => {
    const img = decode(renderLossPlot(decreasing));
    const ema = pixelsOf(img, LOSS_PLOT_COLORS.smoothed);
    const xs = ema.map(([x]) => x);
    const x0 = Math.min(...xs);
    const third = (Math.max(...xs) - x0) / 3;
    const leftYs = ema.filter(([x]) => x < x0 + third).map(([, y]) => y);
    const rightYs = ema.filter(([x]) => x > x0 + 2 * third).map(([, y]) => y);
    expect(leftYs.length).toBeGreaterThan(0);
    expect(rightYs.length).toBeGreaterThan(0);
    expect(mean(leftYs)).toBeLessThan(mean(rightYs) - 50);
    // An increasing curve flips it.
    const rising = decode(renderLossPlot([...decreasing].reverse()));
    const up = pixelsOf(rising, LOSS_PLOT_COLORS.smoothed);
    const ux0 = Math.min(...up.map(([x]) => x));
    const uThird = (Math.max(...up.map(([x]) => x)) - ux0) / 3;
    expect(mean(up.filter(([x]) => x < ux0 + uThird).map(([, y]) => y))).toBeGreaterThan(mean(up.filter(([x]) => x > ux0 + 2 * uThird).map(([, y]) => y)) + 50);
  });

  it('breaks both lines at a NaN and ignores it for the axis range', () => {
    const withNan = [...decreasing];
    withNan[50] = NaN;
    withNan[70] = Infinity;
    const clean = decode(renderLossPlot(decreasing));
    const gapped = decode(renderLossPlot(withNan));
    const xs = pixelsOf(clean, LOSS_PLOT_COLORS.smoothed).map(([x]) => x);
    const x0 = Math.min(...xs);
    const x1 = Math.max(...xs);
    // Step 51 (index 50) lies at this column; with it missing no segment spans steps 50..52.
    const gapX = Math.round(x0 + ((x1 - x0) * 50) / 99);
    const inColumns = (img: PNG, color: Rgb): number => pixelsOf(img, color).filter(([x]) => Math.abs(x - gapX) <= 2).length;
    expect(inColumns(clean, LOSS_PLOT_COLORS.smoothed)).toBeGreaterThan(0);
    expect(inColumns(clean, LOSS_PLOT_COLORS.raw)).toBeGreaterThan(0);
    expect(inColumns(gapped, LOSS_PLOT_COLORS.smoothed)).toBe(0);
    expect(inColumns(gapped, LOSS_PLOT_COLORS.raw)).toBe(0);
    // The lines still run on both sides of the gap, and Infinity did not squash the curve flat.
    const gappedEma = pixelsOf(gapped, LOSS_PLOT_COLORS.smoothed);
    expect(gappedEma.some(([x]) => x < gapX - 10) && gappedEma.some(([x]) => x > gapX + 10)).toBe(true);
    const ys = gappedEma.map(([, y]) => y);
    expect(Math.max(...ys) - Math.min(...ys)).toBeGreaterThan(200);
  });

  it('gives valid PNGs for no losses (no curve) and for one loss (a dot)', () => {
    const empty = decode(renderLossPlot([]));
    expect([empty.width, empty.height]).toEqual([800, 480]);
    expect(pixelsOf(empty, LOSS_PLOT_COLORS.smoothed)).toHaveLength(0);
    expect(pixelsOf(empty, LOSS_PLOT_COLORS.text).length).toBeGreaterThan(0);
    expect(pixelsOf(decode(renderLossPlot([NaN, Infinity])), LOSS_PLOT_COLORS.smoothed)).toHaveLength(0);

    const single = decode(renderLossPlot([2.5]));
    const dot = pixelsOf(single, LOSS_PLOT_COLORS.smoothed);
    expect(dot.length).toBeGreaterThan(0);
    const dxs = dot.map(([x]) => x);
    const dys = dot.map(([, y]) => y);
    // Small, and in the middle of the image (one step centred, equal values centred on a unit range).
    expect(Math.max(...dxs) - Math.min(...dxs)).toBeLessThan(12);
    expect(Math.max(...dys) - Math.min(...dys)).toBeLessThan(12);
    expect(Math.abs(mean(dxs) - 400)).toBeLessThan(60);
    expect(Math.abs(mean(dys) - 240)).toBeLessThan(60);
  });

  it('draws a different title where the title goes', () => {
    const band = (img: PNG): string =>
      pixelsOf(img, LOSS_PLOT_COLORS.text)
        .filter(([, y]) => y < 30)
        .map(([x, y]) => `${x},${y}`)
        .join(' ');
    const a = decode(renderLossPlot(decreasing));
    const b = decode(renderLossPlot(decreasing, { title: 'Train Loss: run 7' }));
    expect(band(a)).not.toBe('');
    expect(band(b)).not.toBe(band(a));
  });

  it('smoothing 0 puts the EMA on the raw line; the default smooths it', () => {
    const jagged = Array.from({ length: 60 }, (_, i) => (i % 2 ? 1 : 2));
    const rawOnly = decode(renderLossPlot(jagged, { smoothing: 0 }));
    // The EMA is drawn over the raw line, so with no smoothing the raw colour barely shows.
    const hiddenRaw = pixelsOf(rawOnly, LOSS_PLOT_COLORS.raw).length;
    const smoothed = decode(renderLossPlot(jagged));
    expect(pixelsOf(smoothed, LOSS_PLOT_COLORS.raw).length).toBeGreaterThan(hiddenRaw * 2);
  });

  it('rejects bad sizes and smoothing outside [0, 1)', () => {
    expect(() => renderLossPlot([1], { width: 0 })).toThrow(RangeError);
    expect(() => renderLossPlot([1], { height: 10.5 })).toThrow(RangeError);
    expect(() => renderLossPlot([1], { smoothing: 1 })).toThrow(RangeError);
    expect(() => renderLossPlot([1], { smoothing: NaN })).toThrow(RangeError);
  });

  it('draws a legend: a framed box holding a swatch of each line and a label, in the corner the curve leaves free', () => {
    const img = decode(renderLossPlot(decreasing));
    const layout = lossPlotLayout(decreasing);
    const box = layout.legend!;
    expect(layout.legendLabels).toEqual(['loss', 'smoothed (EMA 0.9)']);
    // Inside the plot area, top right (a decreasing curve is high on the left).
    expect(box.left).toBeGreaterThan(layout.area.left);
    expect(box.right).toBeLessThan(layout.area.right);
    expect(box.top).toBeGreaterThan(layout.area.top);
    expect(box.left).toBeGreaterThan((layout.area.left + layout.area.right) / 2);
    expect(box.bottom).toBeLessThan((layout.area.top + layout.area.bottom) / 2);
    const inBox = (color: Rgb) => pixelsOf(img, color).filter(([x, y]) => x > box.left && x < box.right && y > box.top && y < box.bottom);
    // The frame on all four sides.
    for (const [x, y] of [
      [Math.round((box.left + box.right) / 2), box.top],
      [Math.round((box.left + box.right) / 2), box.bottom],
      [box.left, Math.round((box.top + box.bottom) / 2)],
      [box.right, Math.round((box.top + box.bottom) / 2)],
    ])
      expect(pixel(img, x, y)).toEqual([...LOSS_PLOT_COLORS.frame]);
    // Each swatch is a horizontal line in its series' colour, the raw one above the smoothed one; labels in text colour
    // to their right; nothing of the curves shows through.
    const raw = inBox(LOSS_PLOT_COLORS.raw);
    const smoothed = inBox(LOSS_PLOT_COLORS.smoothed);
    expect(raw.length).toBeGreaterThan(15);
    expect(smoothed.length).toBeGreaterThan(30);
    const rows = (px: [number, number][]) => new Set(px.map(([, y]) => y));
    expect(rows(raw).size).toBe(1);
    expect(rows(smoothed).size).toBeLessThanOrEqual(4);
    expect(Math.max(...raw.map(([, y]) => y))).toBeLessThan(Math.min(...smoothed.map(([, y]) => y)));
    const text = inBox(LOSS_PLOT_COLORS.text);
    expect(text.length).toBeGreaterThan(100);
    expect(Math.min(...text.map(([x]) => x))).toBeGreaterThan(Math.max(...raw.map(([x]) => x)));
    expect(inBox(LOSS_PLOT_COLORS.grid)).toHaveLength(0);
  });

  it("moves the legend out of a rising curve's way, names one line when smoothing is 0, and skips it with no line", () => {
    const rising = [...decreasing].reverse();
    const layout = lossPlotLayout(rising);
    expect(layout.legend!.right).toBeLessThan((layout.area.left + layout.area.right) / 2);
    expect(layout.legend!.bottom).toBeLessThan((layout.area.top + layout.area.bottom) / 2);
    const img = decode(renderLossPlot(rising));
    const box = layout.legend!;
    expect(pixelsOf(img, LOSS_PLOT_COLORS.smoothed).filter(([x, y]) => x > box.left && x < box.right && y > box.top && y < box.bottom).length).toBeGreaterThan(
      30,
    );

    const single = lossPlotLayout(decreasing, { smoothing: 0 });
    expect(single.legendLabels).toEqual(['loss']);
    const plain = decode(renderLossPlot(decreasing, { smoothing: 0 }));
    const b = single.legend!;
    expect(pixelsOf(plain, LOSS_PLOT_COLORS.raw).filter(([x, y]) => x > b.left && x < b.right && y > b.top && y < b.bottom)).toHaveLength(0);
    expect(b.bottom - b.top).toBeLessThan(box.bottom - box.top);

    for (const losses of [[], [2.5], [NaN, 1]]) {
      expect(lossPlotLayout(losses).legend).toBeUndefined();
      expect(lossPlotLayout(losses).legendLabels).toEqual([]);
    }
    // Too small a plot for a legend beside the curves: none rather than one covering them.
    expect(lossPlotLayout(decreasing, { width: 120, height: 80 }).legend).toBeUndefined();
  });

  it('writeLossPlot writes the same bytes, creating the directory', async () => {
    const path = join(dir, 'nested', 'deeper', 'loss.png');
    await writeLossPlot(path, decreasing, { title: 'run' });
    expect((await readFile(path)).equals(renderLossPlot(decreasing, { title: 'run' }))).toBe(true);
  });
});

describe('smoothLosses', () => {
  it('is bias-corrected like TensorBoard (starts at the first value) and skips non-finite losses', () => {
    const s = smoothLosses([4, 2, NaN, 2], 0.5);
    expect(s[0]).toBeCloseTo(4);
    // Raw EMA from 0: 2 after the first value, then 0.5*2 + 0.5*2 = 2, corrected by / (1 - 0.5^2).
    expect(s[1]).toBeCloseTo(8 / 3, 12);
    expect(s[2]).toBeNaN();
    // The NaN left the average and the count alone: still 2, now corrected by / (1 - 0.5^3).
    expect(s[3]).toBeCloseTo(16 / 7, 12);
    expect(smoothLosses([5, 5, 5], 0.9)).toEqual([5, 5, 5].map((v) => expect.closeTo(v, 12)));
  });
});

describe('niceTicks', () => {
  it('gives round 1/2/5 x 10^k values covering [0, 1]', () => {
    expect(niceTicks(0, 1, 5)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    expect(niceTicks(0, 10, 5)).toEqual([0, 2, 4, 6, 8, 10]);
    expect(niceTicks(0, 100, 2)).toEqual([0, 50, 100]);
    expect(niceTicks(1, 1000, 5)).toEqual([200, 400, 600, 800, 1000]);
  });

  it('keeps ticks inside the range, about count of them, with exact decimals', () => {
    const ticks = niceTicks(0.13, 0.71, 5);
    expect(ticks).toEqual([0.2, 0.3, 0.4, 0.5, 0.6, 0.7]);
    expect(niceTicks(2.31, 2.37, 5)).toEqual([2.31, 2.32, 2.33, 2.34, 2.35, 2.36, 2.37]);
  });

  it('handles negative and reversed ranges, min == max and non-finite bounds', () => {
    expect(niceTicks(-1, 0, 5)).toEqual([-1, -0.8, -0.6, -0.4, -0.2, 0]);
    expect(niceTicks(-3, -1, 4)).toEqual([-3, -2.5, -2, -1.5, -1]);
    expect(niceTicks(1, -1, 4)).toEqual([-1, -0.5, 0, 0.5, 1]);
    expect(niceTicks(2, 2, 5)).toEqual([2]);
    expect(niceTicks(0, Infinity, 5)).toEqual([]);
    expect(niceTicks(NaN, 1, 5)).toEqual([]);
    expect(Object.is(niceTicks(-1, 1, 2)[1], 0)).toBe(true); // 0, not -0
  });
});
