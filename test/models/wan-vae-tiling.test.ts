// Tile grids in diffusers' units: TilingOptions are enable_tiling()'s image-pixel sizes, and the grids of
// decodeTilePlan / encodeTilePlan are the ones diffusers' tiled_decode / tiled_encode (autoencoder_kl_wan.py at
// e87b2a7a) compute, worked out here by hand from its integer divisions for the released Wan2.1 (8 px per latent)
// and Wan2.2 (16 px per latent: 8 from the convolutions, 2 from patchify) shapes. Pure arithmetic: no model runs.
import { describe, expect, it } from 'vitest';
import { decodeTilePlan, DEFAULT_TILING, encodeTilePlan, resolveTiling } from '../../src/models/wan-vae/tiling.js';
import { WAN_VAE_PRESETS } from '../../src/models/wan-vae/random-checkpoint.js';

const wan21 = WAN_VAE_PRESETS['wan2.1'];
const wan22 = WAN_VAE_PRESETS['wan2.2'];

describe('Wan VAE tiling in diffusers units', () => {
  it("defaults are diffusers' AutoencoderKLWan.__init__ values", () => {
    expect(DEFAULT_TILING).toEqual({ tileSampleMinHeight: 256, tileSampleMinWidth: 256, tileSampleStrideHeight: 192, tileSampleStrideWidth: 192 });
  });

  it('decode grid, Wan2.1 defaults: 32-latent tiles every 24, 192 px crops, 64 px blends', () => {
    const plan = decodeTilePlan(wan21, 60, 100);
    expect(plan?.rows).toEqual({ origins: [0, 24, 48], tile: 32, crop: 192, blend: 64 });
    expect(plan?.cols).toEqual({ origins: [0, 24, 48, 72, 96], tile: 32, crop: 192, blend: 64 });
  });

  it('decode grid, Wan2.2 defaults: 16-latent tiles every 12 (as diffusers, not 32), 96 decoder-px crops, 32 px blends', () => {
    // tile_latent_min = 256 // 16, stride 192 // 16; tile_sample_stride = 192 // 2; blend = 256 // 2 - 96.
    const plan = decodeTilePlan(wan22, 45, 80);
    expect(plan?.rows).toEqual({ origins: [0, 12, 24, 36], tile: 16, crop: 96, blend: 32 });
    expect(plan?.cols.origins).toEqual([0, 12, 24, 36, 48, 60, 72]);
    // enable_tiling(96, 96, 64, 64) on Wan2.2: 6-latent tiles every 4.
    const small = decodeTilePlan(wan22, 8, 8, { tileSampleMinHeight: 96, tileSampleMinWidth: 96, tileSampleStrideHeight: 64, tileSampleStrideWidth: 64 });
    expect(small?.rows).toEqual({ origins: [0, 4], tile: 6, crop: 32, blend: 16 });
  });

  it('decode tiles only when a side is longer than one tile (in latents)', () => {
    expect(decodeTilePlan(wan22, 16, 16)).toBeUndefined();
    expect(decodeTilePlan(wan22, 16, 17)).toBeDefined();
    expect(decodeTilePlan(wan21, 32, 32)).toBeUndefined();
    expect(decodeTilePlan(wan21, 33, 1)).toBeDefined();
  });

  it("encode grid: diffusers cuts the patchified video, so Wan2.2's encode tiles are 256 patchified px", () => {
    // Wan2.1 640 x 480: origins every 192 px, tiles 256 // 8 = 32 latents, crops 24, blends 8.
    const a = encodeTilePlan(wan21, 480, 640);
    expect(a?.rows).toEqual({ origins: [0, 192, 384], tile: 256, crop: 24, blend: 8 });
    expect(a?.cols.origins).toEqual([0, 192, 384, 576]);
    // Wan2.2 640 x 640 is tiled (640 > 256) but patchified to 320: origins 0 and 192; encode ratio 16 // 2 = 8.
    const b = encodeTilePlan(wan22, 640, 640);
    expect(b?.rows).toEqual({ origins: [0, 192], tile: 256, crop: 24, blend: 8 });
    expect(encodeTilePlan(wan22, 256, 256)).toBeUndefined();
    expect(encodeTilePlan(wan22, 272, 256)).toBeDefined();
  });

  it('height and width are set separately', () => {
    const plan = decodeTilePlan(wan21, 40, 40, { tileSampleMinHeight: 128, tileSampleStrideHeight: 96 });
    expect(plan?.rows).toEqual({ origins: [0, 12, 24, 36], tile: 16, crop: 96, blend: 32 });
    expect(plan?.cols).toEqual({ origins: [0, 24], tile: 32, crop: 192, blend: 64 });
    expect(plan?.options).toEqual({ ...DEFAULT_TILING, tileSampleMinHeight: 128, tileSampleStrideHeight: 96 });
    // Undefined fields keep the defaults.
    expect(resolveTiling(wan21, { tileSampleMinWidth: undefined })).toEqual(DEFAULT_TILING);
  });

  it('crops of every tile add up to the output exactly', () => {
    for (const config of [wan21, wan22]) {
      for (const [tile, stride] of [
        [64, 32],
        [256, 192],
        [48, 48],
        [96, 16],
      ]) {
        if (tile % (8 * config.patchSize) || stride % (8 * config.patchSize)) continue;
        for (const n of [1, 5, 17, 40]) {
          const o = { tileSampleMinHeight: tile, tileSampleMinWidth: tile, tileSampleStrideHeight: stride, tileSampleStrideWidth: stride };
          const d = decodeTilePlan(config, n, 100, o)!;
          const decoderPx = n * 8;
          const covered = d.rows.origins.reduce((sum, i) => sum + Math.min(d.rows.crop, Math.min(d.rows.tile, n - i) * 8), 0);
          expect(covered, `decode ${tile}/${stride} over ${n} latents`).toBe(decoderPx);
          const px = n * 8 * config.patchSize;
          const e = encodeTilePlan(config, px, 1000, o)!;
          const latents = e.rows.origins.reduce((sum, i) => sum + Math.min(e.rows.crop, Math.min(e.rows.tile, px / config.patchSize - i) / 8), 0);
          expect(latents, `encode ${tile}/${stride} over ${px} px`).toBe(n);
        }
      }
    }
  });

  it('rejects sizes off the latent grid and strides longer than tiles, naming both values', () => {
    expect(() => resolveTiling(wan21, { tileSampleMinWidth: 100 })).toThrow(
      'tiling: tileSampleMinWidth 100 and tileSampleStrideWidth 192 must be positive multiples of 8 (image pixels per latent) with stride <= tile',
    );
    expect(() => resolveTiling(wan22, { tileSampleMinHeight: 264 })).toThrow(
      /tileSampleMinHeight 264 and tileSampleStrideHeight 192 must be positive multiples of 16/,
    );
    expect(() => resolveTiling(wan21, { tileSampleStrideHeight: 264 })).toThrow(/tileSampleMinHeight 256 and tileSampleStrideHeight 264/);
    expect(() => resolveTiling(wan21, { tileSampleStrideWidth: 0 })).toThrow(/tileSampleStrideWidth 0/);
  });
});
