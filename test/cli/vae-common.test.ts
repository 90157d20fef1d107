// What vae-decode and vae-encode share: tiling flags in diffusers' units (--tile / --tile-stride as shorthands for
// both sides), and the step driver whose progress reports count finished chunks and tiles: a report comes only
// after the device wait for that step has resolved, and a run stopped by an error releases what it held.
import { describe, expect, it } from 'vitest';
import { progressText, runStepsWaiting, tilingFromFlags } from '../../src/cli/vae-common.js';
import { Generator, randn } from '../../src/index.js';
import type { Tensor } from '../../src/core/tensor.js';
import { loadWanVae } from '../../src/models/wan-vae/load.js';
import type { CodecProgress, CodecSteps } from '../../src/models/wan-vae/model.js';
import { ensureDefaultVae } from '../../src/models/wan-vae/default-model.js';

describe('tiling flags', () => {
  it("default to diffusers' enable_tiling() sizes; the per-side flags win over the shorthands", () => {
    expect(tilingFromFlags({})).toEqual({ tileSampleMinHeight: 256, tileSampleMinWidth: 256, tileSampleStrideHeight: 192, tileSampleStrideWidth: 192 });
    expect(tilingFromFlags({ tile: 128, tileStride: 96 })).toEqual({
      tileSampleMinHeight: 128,
      tileSampleMinWidth: 128,
      tileSampleStrideHeight: 96,
      tileSampleStrideWidth: 96,
    });
    expect(tilingFromFlags({ tile: 128, tileWidth: 64, tileStride: 96, tileStrideHeight: 32 })).toEqual({
      tileSampleMinHeight: 128,
      tileSampleMinWidth: 64,
      tileSampleStrideHeight: 32,
      tileSampleStrideWidth: 96,
    });
    expect(tilingFromFlags({ tile: 128, tiling: false })).toBe(false);
  });
});

/** Steps that record how far they have been run. */
function fakeSteps(n: number, log: string[]): CodecSteps {
  return (function* () {
    try {
      for (let i = 1; i <= n; i++) {
        log.push(`queued ${i}`);
        yield { chunks: i, totalChunks: n, tiles: i === n ? 1 : 0, totalTiles: 1 };
      }
      return { disposed: false } as unknown as Tensor;
    } finally {
      log.push('released');
    }
  })();
}

describe('runStepsWaiting', () => {
  it('reports each step only after the device wait for it has resolved', async () => {
    const log: string[] = [];
    let waits = 0;
    const wait = async () => {
      await new Promise((r) => setTimeout(r, 1));
      log.push(`finished ${++waits}`);
    };
    await runStepsWaiting(fakeSteps(3, log), (p) => log.push(`report ${progressText(p)}`), wait);
    expect(log).toEqual([
      'queued 1',
      'finished 1',
      'report tile 0/1, chunk 1/3',
      'queued 2',
      'finished 2',
      'report tile 0/1, chunk 2/3',
      'queued 3',
      'finished 3',
      'report tile 1/1, chunk 3/3',
      'released',
    ]);
  });

  it('stops the steps (their finally runs) when waiting fails', async () => {
    const log: string[] = [];
    const wait = async () => {
      throw new Error('device lost');
    };
    await expect(runStepsWaiting(fakeSteps(3, log), () => log.push('report'), wait)).rejects.toThrow('device lost');
    expect(log).toEqual(['queued 1', 'released']);
  });

  it('a tiled decode yields every chunk of every tile, then the tile, ending at the totals', async () => {
    const vae = await loadWanVae(await ensureDefaultVae(), { device: 'cpu', parts: 'decoder' });
    const z = randn([1, 16, 2, 4, 4], { device: 'cpu', generator: new Generator(2) });
    const seen: CodecProgress[] = [];
    // 24 / 16 px on 8 px per latent: 3-latent tiles every 2, so 2 x 2 tiles of 2 chunks (latent frames) each.
    const tiling = { tileSampleMinHeight: 24, tileSampleMinWidth: 24, tileSampleStrideHeight: 16, tileSampleStrideWidth: 16 };
    const video = await runStepsWaiting(vae.decodeSteps(z, { tiling }), (p) => seen.push(p));
    expect(video.shape).toEqual([1, 3, 5, 32, 32]);
    expect(seen.map((p) => `${p.tiles}:${p.chunks}`)).toEqual(['0:1', '0:2', '1:2', '1:3', '1:4', '2:4', '2:5', '2:6', '3:6', '3:7', '3:8', '4:8']);
    expect(seen.every((p) => p.totalChunks === 8 && p.totalTiles === 4)).toBe(true);
    video.dispose();
    z.dispose();
    vae.dispose();
  }, 120_000);
});
