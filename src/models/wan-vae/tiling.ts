// diffusers' spatial tiling of AutoencoderKLWan, in diffusers' own units: enable_tiling()'s tile_sample_min_* and
// tile_sample_stride_* are pixels of the image (after Wan2.2's unpatchify), and the tile grids of tiled_decode and
// tiled_encode are derived from them exactly as diffusers derives them, including where the two differ.
import { tidy } from '../../core/scope.js';
import type { Tensor } from '../../core/tensor.js';
import { tensor } from '../../ops/creation.js';
import { copyInto } from '../../ops/shape-ops.js';
import { convScale, spatialScale, type WanVaeConfig } from './config.js';

/** enable_tiling(tile_sample_min_height, tile_sample_min_width, tile_sample_stride_height, tile_sample_stride_width). */
export interface TilingOptions {
  /** Tile height in image pixels; default 256. */
  tileSampleMinHeight?: number;
  /** Tile width in image pixels; default 256. */
  tileSampleMinWidth?: number;
  /** Distance between tile origins down the image, in image pixels; default 192. The overlap is blended linearly. */
  tileSampleStrideHeight?: number;
  /** Distance between tile origins across the image, in image pixels; default 192. */
  tileSampleStrideWidth?: number;
}

/** diffusers' AutoencoderKLWan defaults (__init__), the same for every patch size. */
export const DEFAULT_TILING: Readonly<Required<TilingOptions>> = {
  tileSampleMinHeight: 256,
  tileSampleMinWidth: 256,
  tileSampleStrideHeight: 192,
  tileSampleStrideWidth: 192,
};

/** One axis of a tile grid. */
export interface TileAxis {
  /** Tile origins and the tile length, in the input's units (latent pixels to decode, patchified pixels to encode). */
  readonly origins: readonly number[];
  readonly tile: number;
  /** In the output's units (decoder pixels before unpatchify, latent pixels): each tile's kept part, and the
   * overlap blended into it from its predecessor. */
  readonly crop: number;
  readonly blend: number;
}

export interface TilePlan {
  readonly rows: TileAxis;
  readonly cols: TileAxis;
  /** The sizes asked for, with defaults filled in (image pixels). */
  readonly options: Readonly<Required<TilingOptions>>;
}

/**
 * Defaults filled in and checked: every size a positive multiple of the pixels per latent (so each tile starts on
 * a latent, as diffusers' integer divisions assume), and each stride at most its tile (no gaps between tiles).
 */
export function resolveTiling(config: WanVaeConfig, options: TilingOptions = {}): Required<TilingOptions> {
  const o = { ...DEFAULT_TILING, ...definedOnly(options) };
  const s = spatialScale(config);
  for (const [tileKey, strideKey] of [
    ['tileSampleMinHeight', 'tileSampleStrideHeight'],
    ['tileSampleMinWidth', 'tileSampleStrideWidth'],
  ] as const) {
    const [tile, stride] = [o[tileKey], o[strideKey]];
    const bad = (v: number) => !Number.isInteger(v) || v <= 0 || v % s !== 0;
    if (bad(tile) || bad(stride) || stride > tile) {
      throw new RangeError(
        `tiling: ${tileKey} ${tile} and ${strideKey} ${stride} must be positive multiples of ${s} (image pixels per latent) with stride <= tile`,
      );
    }
  }
  return o;
}

function definedOnly(o: TilingOptions): TilingOptions {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as TilingOptions;
}

const origins = (n: number, step: number) => Array.from({ length: Math.ceil(n / step) }, (_, i) => i * step);

/**
 * diffusers' tiled_decode grid for latents h x w, or undefined when _decode would not tile (neither side longer
 * than a tile in latents). Tiles are tile_sample_min / spatial ratio latents, every tile_sample_stride / ratio;
 * crop and blend are tile_sample_stride / patch_size and (tile_sample_min - tile_sample_stride) / patch_size
 * decoder pixels (diffusers' Wan2.2 tiling fix, #12521).
 */
export function decodeTilePlan(config: WanVaeConfig, h: number, w: number, tiling: TilingOptions = {}): TilePlan | undefined {
  const o = resolveTiling(config, tiling);
  const r = spatialScale(config);
  const p = config.patchSize;
  const axis = (n: number, tile: number, stride: number): TileAxis => ({
    origins: origins(n, stride / r),
    tile: tile / r,
    crop: stride / p,
    blend: (tile - stride) / p,
  });
  if (h <= o.tileSampleMinHeight / r && w <= o.tileSampleMinWidth / r) return undefined;
  return { rows: axis(h, o.tileSampleMinHeight, o.tileSampleStrideHeight), cols: axis(w, o.tileSampleMinWidth, o.tileSampleStrideWidth), options: o };
}

/**
 * diffusers' tiled_encode grid for a video H x W (image pixels), or undefined when _encode would not tile. diffusers
 * compares the image size with tile_sample_min but then cuts the *patchified* video: with patch_size 2 (Wan2.2) its
 * encode tiles and strides are tile_sample_min / tile_sample_stride patchified pixels, twice the image pixels its
 * decode tiles span. This follows diffusers (#12753) so that latents match its output.
 */
export function encodeTilePlan(config: WanVaeConfig, height: number, width: number, tiling: TilingOptions = {}): TilePlan | undefined {
  const o = resolveTiling(config, tiling);
  const c = convScale(config);
  const p = config.patchSize;
  const axis = (n: number, tile: number, stride: number): TileAxis => ({ origins: origins(n / p, stride), tile, crop: stride / c, blend: (tile - stride) / c });
  if (height <= o.tileSampleMinHeight && width <= o.tileSampleMinWidth) return undefined;
  return { rows: axis(height, o.tileSampleMinHeight, o.tileSampleStrideHeight), cols: axis(width, o.tileSampleMinWidth, o.tileSampleStrideWidth), options: o };
}

/**
 * diffusers' blend_v (dim 3) / blend_h (dim 4), in place on b: over the first e = min(a, b, extent) positions,
 * b[y] = a[-e + y] (1 - y / e) + b[y] (y / e). `strip` holds a's last positions along dim.
 */
export function blendInto(b: Tensor, strip: Tensor, extent: number, dim: 3 | 4): void {
  const e = Math.min(strip.shape[dim], b.shape[dim], extent);
  if (e <= 0) return;
  tidy(() => {
    const shape = [1, 1, 1, 1, 1];
    shape[dim] = e;
    const ramp = new Float32Array(e).map((_, y) => y / e);
    const r = tensor(ramp, { device: b.device }).reshape(shape);
    const rest = tensor(
      ramp.map((v) => 1 - v),
      { device: b.device },
    ).reshape(shape);
    const a = strip.narrow(dim, strip.shape[dim] - e, e);
    const head = b.narrow(dim, 0, e);
    copyInto(head, a.mul(rest).add(head.mul(r)));
  });
}
