// writeVideoPng: [-1, 1] -> bytes ((v + 1) * 127.5, rounded, clamped), RGB and grayscale PNGs read back with pngjs,
// one frame to the given path and several to a numbered sequence beside it.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PNG } from 'pngjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setDefaultDevice, ShapeError, tensor } from '../../src/index.js';
import { framePaths, toByte, writeVideoPng } from '../../src/media/png-writer.js';

setDefaultDevice('cpu');

let dir = '';
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tensorgpu-png-'));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('writeVideoPng', () => {
  it('maps [-1, 1] to 0..255, rounding and clamping (NaN -> 0)', () => {
    expect([-1, 1, 0, -2, 2, 0.5, -0.996, NaN, Infinity, -Infinity].map(toByte)).toEqual([0, 255, 128, 0, 255, 191, 1, 0, 255, 0]);
  });

  it('names a single frame as given and a sequence stem-0000.ext, stem-0001.ext, ...', () => {
    expect(framePaths('a/out.png', 1)).toEqual(['a/out.png']);
    expect(framePaths('a/out.png', 2)).toEqual([join('a', 'out-0000.png'), join('a', 'out-0001.png')]);
    expect(framePaths('frames', 2)).toEqual([join('.', 'frames-0000.png'), join('.', 'frames-0001.png')]);
  });

  it('writes an RGB frame pixel for pixel', async () => {
    // [1, 3, 1, 2, 2]: red ramps along x, green along y, blue constant.
    const r = [-1, 1, -1, 1];
    const g = [-1, -1, 1, 1];
    const b = [0, 0, 0, 0];
    const out = join(dir, 'rgb.png');
    expect(await writeVideoPng(tensor([...r, ...g, ...b], { shape: [1, 3, 1, 2, 2] }), out)).toEqual([out]);
    const png = PNG.sync.read(await readFile(out));
    expect([png.width, png.height]).toEqual([2, 2]);
    // pngjs reads back RGBA.
    expect(Array.from(png.data)).toEqual([0, 0, 128, 255, 255, 0, 128, 255, 0, 255, 128, 255, 255, 255, 128, 255]);
  });

  it('writes each frame of a grayscale video to its own file', async () => {
    const values = [-1, -1, -1, 0, 0, 0, 1, 1, 1]; // [1, 1, 3, 1, 3]
    const out = join(dir, 'gray.png');
    const paths = await writeVideoPng(tensor(values, { shape: [1, 1, 3, 1, 3] }), out);
    expect(paths).toEqual([0, 1, 2].map((i) => join(dir, `gray-000${i}.png`)));
    expect(existsSync(out)).toBe(false);
    for (const [i, p] of paths.entries()) {
      const png = PNG.sync.read(await readFile(p));
      expect([png.width, png.height]).toEqual([3, 1]);
      const v = [0, 128, 255][i];
      expect(Array.from(png.data)).toEqual([v, v, v, 255, v, v, v, 255, v, v, v, 255]);
    }
  });

  it('rejects batches, other channel counts and empty videos', async () => {
    const out = join(dir, 'bad.png');
    await expect(writeVideoPng(tensor(new Float32Array(8), { shape: [2, 1, 1, 2, 2] }), out)).rejects.toThrow(ShapeError);
    await expect(writeVideoPng(tensor(new Float32Array(8), { shape: [1, 2, 1, 2, 2] }), out)).rejects.toThrow(/C = 1 or 3/);
    await expect(writeVideoPng(tensor(new Float32Array(4), { shape: [1, 2, 2] }), out)).rejects.toThrow(/\[1, C, F, H, W\]/);
    await expect(writeVideoPng(tensor(new Float32Array(0), { shape: [1, 3, 0, 2, 2] }), out)).rejects.toThrow(/empty/);
    expect(existsSync(out)).toBe(false);
  });
});
