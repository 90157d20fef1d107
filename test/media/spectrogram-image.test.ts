// spectrogramPng / writeSpectrogramPng: the PNG decoded with pngjs and read pixel by pixel, so the tests check the
// orientation (row 0 at the bottom, time left to right), the value-to-color mapping and the scaling.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PNG } from 'pngjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ShapeError } from '../../src/core/errors.js';
import { SPECTROGRAM_AXIS_COLORS, SPECTROGRAM_COLORMAPS, spectrogramLayout, spectrogramPng, writeSpectrogramPng } from '../../src/media/spectrogram-image.js';

let dir = '';
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tensorgpu-spectrogram-'));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

function pixel(img: PNG, x: number, y: number): number[] {
  const i = (y * img.width + x) * 4;
  return [img.data[i], img.data[i + 1], img.data[i + 2]];
}

const magma = SPECTROGRAM_COLORMAPS.magma;
const viridis = SPECTROGRAM_COLORMAPS.viridis;
const first = (map: typeof magma) => [...map[0]];
const last = (map: typeof magma) => [...map[map.length - 1]];

/** [rows, cols] = [3, 4]: value r * 4 + c, so row 0 holds the smallest values and (2, 3) the largest. */
const ramp = Float32Array.from({ length: 12 }, (_, i) => i);

describe('spectrogramPng', () => {
  it('is cols wide and rows high, with row 0 at the bottom and time left to right', () => {
    const img = PNG.sync.read(spectrogramPng(ramp, 3, 4));
    expect([img.width, img.height]).toEqual([4, 3]);
    // Bottom-left is row 0, col 0: the minimum.
    expect(pixel(img, 0, 2)).toEqual(first(magma));
    // Top-right is row 2, col 3: the maximum.
    expect(pixel(img, 3, 0)).toEqual(last(magma));
    // Top-left is row 2, col 0 (value 8), bottom-right row 0, col 3 (value 3): the top row is brighter.
    const brightness = (p: number[]) => p[0] + p[1] + p[2];
    expect(brightness(pixel(img, 0, 0))).toBeGreaterThan(brightness(pixel(img, 3, 2)));
  });

  it('maps min to the first anchor and max to the last, for both colormaps', () => {
    for (const [name, map] of [
      ['magma', magma],
      ['viridis', viridis],
    ] as const) {
      const img = PNG.sync.read(spectrogramPng(new Float32Array([-5, 7]), 1, 2, { colormap: name }));
      expect(pixel(img, 0, 0)).toEqual(first(map));
      expect(pixel(img, 1, 0)).toEqual(last(map));
    }
    // Anchors from matplotlib: viridis runs #440154 -> #fde725, magma #000004 -> #fcfdbf.
    expect([first(viridis), last(viridis)]).toEqual([
      [68, 1, 84],
      [253, 231, 37],
    ]);
    expect([first(magma), last(magma)]).toEqual([
      [0, 0, 4],
      [252, 253, 191],
    ]);
  });

  it('interpolates between anchors: the midpoint is the middle anchor', () => {
    const img = PNG.sync.read(spectrogramPng(new Float32Array([0, 0.5, 1]), 1, 3, { colormap: 'viridis' }));
    expect(pixel(img, 1, 0)).toEqual([...viridis[(viridis.length - 1) / 2]]);
  });

  it('explicit min and max clamp values outside them, infinities included', () => {
    const values = new Float32Array([-100, 0, 10, 100, Infinity, -Infinity]);
    const img = PNG.sync.read(spectrogramPng(values, 1, 6, { min: 0, max: 10 }));
    expect(pixel(img, 0, 0)).toEqual(first(magma));
    expect(pixel(img, 1, 0)).toEqual(first(magma));
    expect(pixel(img, 2, 0)).toEqual(last(magma));
    expect(pixel(img, 3, 0)).toEqual(last(magma));
    expect(pixel(img, 4, 0)).toEqual(last(magma));
    expect(pixel(img, 5, 0)).toEqual(first(magma));
  });

  it('the default range ignores non-finite values', () => {
    const img = PNG.sync.read(spectrogramPng(new Float32Array([-Infinity, 2, 4, NaN, Infinity]), 1, 5));
    expect(pixel(img, 1, 0)).toEqual(first(magma));
    expect(pixel(img, 2, 0)).toEqual(last(magma));
  });

  it('draws NaN black', () => {
    const img = PNG.sync.read(spectrogramPng(new Float32Array([0, NaN, 1]), 1, 3));
    expect(pixel(img, 1, 0)).toEqual([0, 0, 0]);
    expect(pixel(img, 0, 0)).not.toEqual([0, 0, 0]);
    const allNan = PNG.sync.read(spectrogramPng(new Float32Array([NaN, NaN]), 2, 1));
    expect([pixel(allNan, 0, 0), pixel(allNan, 0, 1)]).toEqual([
      [0, 0, 0],
      [0, 0, 0],
    ]);
  });

  it('constant data takes the first color', () => {
    const img = PNG.sync.read(spectrogramPng(new Float32Array([3, 3, 3, 3]), 2, 2));
    for (let y = 0; y < 2; y++) for (let x = 0; x < 2; x++) expect(pixel(img, x, y)).toEqual(first(magma));
  });

  it('a single given bound never crosses the data-derived one', () => {
    // min above all the data: everything at or below it is the first color, no error.
    const img = PNG.sync.read(spectrogramPng(new Float32Array([1, 2]), 1, 2, { min: 5 }));
    expect([pixel(img, 0, 0), pixel(img, 1, 0)]).toEqual([first(magma), first(magma)]);
  });

  it('scale enlarges each value to a scale x scale block', () => {
    const img = PNG.sync.read(spectrogramPng(ramp, 3, 4, { scale: 3 }));
    expect([img.width, img.height]).toEqual([12, 9]);
    for (let dy = 0; dy < 3; dy++) {
      for (let dx = 0; dx < 3; dx++) {
        // Row 0, col 0 fills the bottom-left 3x3 block; row 2, col 3 the top-right one.
        expect(pixel(img, dx, 6 + dy)).toEqual(first(magma));
        expect(pixel(img, 9 + dx, dy)).toEqual(last(magma));
      }
    }
    expect(pixel(img, 3, 8)).not.toEqual(first(magma));
  });

  it('rejects a size mismatch and bad options', () => {
    expect(() => spectrogramPng(ramp, 3, 5)).toThrow(ShapeError);
    expect(() => spectrogramPng(ramp, 0, 4)).toThrow(ShapeError);
    expect(() => spectrogramPng(ramp, 3, 4, { scale: 0 })).toThrow(/scale must be a positive integer, got 0/);
    expect(() => spectrogramPng(ramp, 3, 4, { scale: 1.5 })).toThrow(RangeError);
    expect(() => spectrogramPng(ramp, 3, 4, { min: 2, max: 1 })).toThrow(/min 2 is above max 1/);
    expect(() => spectrogramPng(ramp, 3, 4, { min: NaN })).toThrow(/min must be finite/);
  });
});

describe('spectrogramPng with axes', () => {
  // 80 mel bins x 500 frames of 10 ms (Whisper's hop): 5 s across, bins 0..79 up.
  const rows = 80;
  const cols = 500;
  const mel = Float32Array.from({ length: rows * cols }, (_, i) => Math.floor(i / cols) + (i % cols) / cols);
  const axes = { x: { label: 'time (s)', step: 0.01 }, y: { label: 'mel bin', step: 1 } };
  const axisColor = [...SPECTROGRAM_AXIS_COLORS.axis];
  const textColor = [...SPECTROGRAM_AXIS_COLORS.text];
  const same = (a: number[], b: number[]) => a[0] === b[0] && a[1] === b[1] && a[2] === b[2];

  it('grows the image by the documented margins and keeps the heat map pixels as without axes', () => {
    const layout = spectrogramLayout(rows, cols, { axes });
    const img = PNG.sync.read(spectrogramPng(mel, rows, cols, { axes }));
    const bare = PNG.sync.read(spectrogramPng(mel, rows, cols));
    expect([img.width, img.height]).toEqual([layout.width, layout.height]);
    const { left, top, width, height } = layout.map;
    expect([width, height]).toEqual([cols, rows]);
    // left = pad 3 + text 7 + pad 3 + widest y label ('50' or '75': 11) + pad 3 + tick 4; bottom = 4 + 3 + 7 + 3 + 7 + 3.
    const yLabelW = Math.max(...layout.yTicks.map((t) => t.label.length * 6 - 1));
    expect(left).toBe(3 + 7 + 3 + yLabelW + 3 + 4);
    expect(layout.height - top - rows).toBe(4 + 3 + 7 + 3 + 7 + 3);
    expect(layout.width).toBeGreaterThan(left + cols);
    for (const [x, y] of [
      [0, 0],
      [cols - 1, 0],
      [0, rows - 1],
      [cols - 1, rows - 1],
      [250, 40],
    ])
      expect(pixel(img, left + x, top + y)).toEqual(pixel(bare, x, y));
    // Without axes the layout is the bare map.
    expect(spectrogramLayout(rows, cols, { scale: 2 })).toMatchObject({ width: 2 * cols, height: 2 * rows, map: { left: 0, top: 0 } });
  });

  it('draws the axis lines on the left and bottom edges, tick marks at round values, and their labels', () => {
    const layout = spectrogramLayout(rows, cols, { axes });
    const img = PNG.sync.read(spectrogramPng(mel, rows, cols, { axes }));
    const { left, top } = layout.map;
    // The axis lines run one pixel outside the map, along its whole height and width.
    for (let y = top; y <= top + rows; y++) expect(pixel(img, left - 1, y)).toEqual(axisColor);
    for (let x = left - 1; x < left + cols; x++) expect(pixel(img, x, top + rows)).toEqual(axisColor);
    // Time ticks every 0.5 s from 0.0 to 4.5 (frame i's centre is i * 10 ms), mel bins 0 and 50.
    expect(layout.xTicks.map((t) => t.label)).toEqual(['0.0', '0.5', '1.0', '1.5', '2.0', '2.5', '3.0', '3.5', '4.0', '4.5']);
    expect(layout.xTicks.map((t) => t.pixel - left)).toEqual([0, 50, 100, 150, 200, 250, 300, 350, 400, 450]);
    expect(layout.yTicks.map((t) => t.label)).toEqual(['0', '50']);
    expect(layout.yTicks.map((t) => t.pixel - top)).toEqual([rows - 1, rows - 1 - 50]);
    for (const t of layout.xTicks) {
      for (let d = 1; d <= 4; d++) expect(pixel(img, t.pixel, top + rows + d)).toEqual(axisColor);
      // Its label: text pixels below the mark, within half a label's width of it.
      let ink = 0;
      for (let y = top + rows + 8; y < top + rows + 15; y++) for (let x = t.pixel - 9; x <= t.pixel + 9; x++) if (same(pixel(img, x, y), textColor)) ink++;
      expect(ink, `label ${t.label}`).toBeGreaterThan(8);
    }
    for (const t of layout.yTicks) {
      for (let d = 2; d <= 5; d++) expect(pixel(img, left - d, t.pixel)).toEqual(axisColor);
      let ink = 0;
      for (let y = t.pixel - 3; y <= t.pixel + 3; y++) for (let x = left - 5 - 3 - 11; x < left - 5 - 3 + 1; x++) if (same(pixel(img, x, y), textColor)) ink++;
      expect(ink, `label ${t.label}`).toBeGreaterThan(8);
    }
    // Axis titles: text under the time labels, and a vertical one at the far left.
    let below = 0;
    for (let y = top + rows + 18; y < layout.height; y++) for (let x = 0; x < layout.width; x++) if (same(pixel(img, x, y), textColor)) below++;
    expect(below).toBeGreaterThan(30);
    let side = 0;
    for (let y = 0; y < layout.height; y++) for (let x = 0; x < 3 + 7; x++) if (same(pixel(img, x, y), textColor)) side++;
    expect(side).toBeGreaterThan(30);
  });

  it('frequency in Hz from a start and step, ticks within the data, scale and text size growing together', () => {
    // A 512-point STFT at 16 kHz: 257 bins of 31.25 Hz, 0..8000 Hz; scale 2 gives a 514-pixel-high map, text x2.
    const layout = spectrogramLayout(257, 300, { scale: 2, axes: { x: { label: 'time (s)', step: 0.008 }, y: { label: 'frequency (Hz)', step: 31.25 } } });
    expect(layout.textScale).toBe(2);
    const ys = layout.yTicks.map((t) => t.value);
    expect(ys[0]).toBe(0);
    expect(ys[ys.length - 1]).toBe(8000);
    expect(layout.yTicks[0].pixel).toBe(layout.map.top + 512);
    expect(layout.yTicks[ys.length - 1].pixel).toBe(layout.map.top);
    // The top label overhangs the map: the top margin makes room for half of it.
    expect(layout.map.top).toBeGreaterThanOrEqual(7);
    const shifted = spectrogramLayout(10, 10, { axes: { x: { label: 't', start: 1, step: 1 }, y: { label: 'bin', step: 1 } } });
    expect(shifted.xTicks[0].value).toBeGreaterThanOrEqual(1);
    expect(() => spectrogramPng(ramp, 3, 4, { axes: { x: { label: 't', step: 0 }, y: { label: 'f', step: 1 } } })).toThrow(/axes.x.step must be positive/);
  });
});

describe('writeSpectrogramPng', () => {
  it('writes the same PNG to a path, creating its directory', async () => {
    const path = join(dir, 'nested', 'mel.png');
    await writeSpectrogramPng(path, ramp, 3, 4, { colormap: 'viridis', scale: 2 });
    const bytes = await readFile(path);
    expect(bytes.equals(spectrogramPng(ramp, 3, 4, { colormap: 'viridis', scale: 2 }))).toBe(true);
  });
});
