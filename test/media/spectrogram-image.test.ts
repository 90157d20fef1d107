// spectrogramPng / writeSpectrogramPng: the PNG decoded with pngjs and read pixel by pixel, so the tests check the
// orientation (row 0 at the bottom, time left to right), the value-to-color mapping and the scaling.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PNG } from 'pngjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ShapeError } from '../../src/core/errors.js';
import { SPECTROGRAM_COLORMAPS, spectrogramPng, writeSpectrogramPng } from '../../src/media/spectrogram-image.js';

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

describe('writeSpectrogramPng', () => {
  it('writes the same PNG to a path, creating its directory', async () => {
    const path = join(dir, 'nested', 'mel.png');
    await writeSpectrogramPng(path, ramp, 3, 4, { colormap: 'viridis', scale: 2 });
    const bytes = await readFile(path);
    expect(bytes.equals(spectrogramPng(ramp, 3, 4, { colormap: 'viridis', scale: 2 }))).toBe(true);
  });
});
