// AutoencoderKLWan (Wan2.1 / Wan2.2 / Qwen-Image VAE): causal chunked encode and decode with the feature cache,
// Wan2.2's 2x2 patchify, and tiled decode that blends overlapping tiles like diffusers' tiled_decode while keeping
// only one tile's working set (plus the output and two thin blend strips) alive.
import { ShapeError } from '../../core/errors.js';
import type { Tensor } from '../../core/tensor.js';
import { tensor, zeros } from '../../ops/creation.js';
import { cat, copyInto } from '../../ops/shape-ops.js';
import { tidy } from '../../core/scope.js';
import type { WanVaeSpec } from './architecture.js';
import { FeatureCache, narrowCopy, WanVaeLayers } from './blocks.js';
import { convScale, temporalScale, type WanVaeConfig } from './config.js';

export interface TilingOptions {
  /** Tile height and width in decoder pixels (before Wan2.2's unpatchify, as diffusers counts them); default 256. */
  tileSize?: number;
  /** Distance between tile origins in the same pixels; default 192. The overlap is blended linearly. */
  stride?: number;
}

export interface DecodeOptions {
  /** Decode in overlapping spatial tiles when the latent is larger than one tile (diffusers' enable_tiling()). */
  tiling?: boolean | TilingOptions;
  /** Called after each decoded chunk (latent frame) of each tile. */
  onProgress?: (done: number, total: number) => void;
}

export interface TilePlan {
  /** Tile and stride in latent pixels. */
  readonly latentTile: number;
  readonly latentStride: number;
  /** Overlap blended between neighbours, in decoder pixels. */
  readonly blend: number;
  readonly stride: number;
  /** Tile origins (latent rows and columns). */
  readonly rows: readonly number[];
  readonly cols: readonly number[];
}

/** diffusers' tile grid: origins every latentStride, tiles latentTile long (clipped at the edges). */
export function tilePlan(latentHeight: number, latentWidth: number, scale: number, options: TilingOptions = {}): TilePlan {
  const tile = options.tileSize ?? 256;
  const stride = options.stride ?? 192;
  if (!Number.isInteger(tile) || !Number.isInteger(stride) || stride <= 0 || stride > tile || tile % scale !== 0 || stride % scale !== 0) {
    throw new RangeError(`tiling: tileSize ${tile} and stride ${stride} must be multiples of ${scale} with 0 < stride <= tileSize`);
  }
  const range = (n: number, step: number) => Array.from({ length: Math.ceil(n / step) }, (_, i) => i * step);
  return { latentTile: tile / scale, latentStride: stride / scale, blend: tile - stride, stride, rows: range(latentHeight, stride / scale), cols: range(latentWidth, stride / scale) };
}

/** [B, C, F, H, W] -> [B, C p^2, F, H/p, W/p] with diffusers' channel order (c, w-offset, h-offset). */
export function patchify(x: Tensor, p: number): Tensor {
  if (p === 1) return x.narrow(0, 0, x.shape[0]);
  const [n, c, f, h, w] = x.shape;
  if (h % p !== 0 || w % p !== 0) throw new ShapeError(`patchify: height ${h} and width ${w} must be multiples of the patch size ${p}`);
  return tidy(() => x.reshape([n, c, f, h / p, p, w / p, p]).permute([0, 1, 6, 4, 2, 3, 5]).reshape([n, c * p * p, f, h / p, w / p]));
}

export class WanVae {
  private readonly layers: WanVaeLayers;

  constructor(
    readonly config: WanVaeConfig,
    readonly spec: WanVaeSpec,
    private readonly weights: ReadonlyMap<string, Tensor>,
  ) {
    this.layers = new WanVaeLayers((name) => {
      const t = weights.get(name);
      if (!t) throw new ShapeError(`WanVae: weight '${name}' is not loaded (was the model loaded without this part?)`);
      return t;
    });
  }

  /** Pixels per latent along height and width (8 for Wan2.1, 16 for Wan2.2). */
  get spatialScale(): number {
    return convScale(this.config) * this.config.patchSize;
  }

  get temporalScale(): number {
    return temporalScale(this.config);
  }

  /** Image channels of the decoded video (3 for RGB). */
  get imageChannels(): number {
    return this.spec.decoder.convOut.cout / this.config.patchSize ** 2;
  }

  /** Frames decoded from `latentFrames` latent frames (1 + 4 (T - 1) for the released models). */
  framesFor(latentFrames: number): number {
    return latentFrames === 0 ? 0 : 1 + this.temporalScale * (latentFrames - 1);
  }

  /**
   * Latents [B, zDim, T, h, w] -> video [B, C, 1 + 4 (T - 1), h * scale, w * scale] in [-1, 1], on the latents'
   * device. Queued, not awaited: read the result to wait for it. Each decoded chunk (or blended tile crop) is
   * clamped and written straight into the output in image layout (unpatchified by the copy's strides), so no
   * full-size temporary exists besides the output.
   */
  decode(z: Tensor, options: DecodeOptions = {}): Tensor {
    const zDim = this.config.zDim;
    if (z.ndim !== 5 || z.shape[1] !== zDim) throw new ShapeError(`WanVae.decode: latents must be [B, ${zDim}, T, h, w], got ${z.describe()}`);
    if (z.shape.some((s) => s === 0)) throw new ShapeError(`WanVae.decode: latents ${z.describe()} are empty`);
    const scale = convScale(this.config);
    const [n, , t, h, w] = z.shape;
    const tiling = options.tiling === true ? {} : options.tiling || undefined;
    const plan = tiling ? tilePlan(h, w, scale, tiling) : undefined;
    const s = this.spatialScale;
    const out = zeros([n, this.imageChannels, this.framesFor(t), h * s, w * s], { device: z.device });
    try {
      if (plan && (h > plan.latentTile || w > plan.latentTile)) this.decodeTiled(z, plan, out, options.onProgress);
      else this.decodeRegion(z, (chunk, frame) => this.writeImage(out, chunk, frame, 0, 0), options.onProgress);
      return out;
    } catch (e) {
      out.dispose();
      throw e;
    }
  }

  /** Clamps decoder output [B, Cd, Tc, hd, wd] and copies it, unpatchified, into out at (frame, y, x) (decoder pixels). */
  private writeImage(out: Tensor, src: Tensor, frame: number, y: number, x: number): void {
    const p = this.config.patchSize;
    const [n, cd, tc, hd, wd] = src.shape;
    const c = cd / (p * p);
    tidy(() => {
      const clamped = src.maximum(-1).minimum(1);
      const region = out.narrow(2, frame, tc).narrow(3, y * p, hd * p).narrow(4, x * p, wd * p);
      // diffusers' unpatchify: out[c, f, h p + b, w p + a] = x[c p^2 + a p + b, f, h, w].
      const dst = region.view([n, c, tc, hd, p, wd, p]).permute([0, 1, 6, 4, 2, 3, 5]);
      copyInto(dst, clamped.view([n, c, p, p, tc, hd, wd]));
    });
  }

  /**
   * Video [B, C, F, H, W] in [-1, 1] (F = 1 + 4k, H and W multiples of spatialScale) -> the latent posterior's mean
   * [B, zDim, 1 + k, H / scale, W / scale].
   */
  encode(x: Tensor): Tensor {
    const [n, c, f, h, w] = x.shape;
    const s = this.spatialScale;
    const ts = this.temporalScale;
    if (x.ndim !== 5 || c !== this.imageChannels) throw new ShapeError(`WanVae.encode: video must be [B, ${this.imageChannels}, F, H, W], got ${x.describe()}`);
    if (f < 1 || (f - 1) % ts !== 0) throw new ShapeError(`WanVae.encode: frame count ${f} must be 1 + ${ts}k`);
    if (h % s !== 0 || w % s !== 0 || h === 0 || w === 0 || n === 0) throw new ShapeError(`WanVae.encode: height ${h} and width ${w} must be positive multiples of ${s}`);
    const e = this.spec.encoder;
    return tidy(() => {
      const xp = patchify(x, this.config.patchSize);
      const cache = new FeatureCache();
      try {
        const chunks: Tensor[] = [];
        for (let start = 0; start < f; start = start === 0 ? 1 : start + ts) {
          chunks.push(this.layers.encoder(xp.narrow(2, start, start === 0 ? 1 : ts), e, cache));
        }
        const moments = chunks.length === 1 ? chunks[0] : cat(chunks, 2);
        const q = this.layers.conv(moments, this.spec.quantConv);
        return narrowCopy(q, 1, 0, this.config.zDim);
      } finally {
        cache.dispose();
      }
    });
  }

  /** Decodes a latent region chunk by chunk (one latent frame each), handing each chunk and its first frame to emit. */
  private decodeRegion(z: Tensor, emit: (chunk: Tensor, frame: number) => void, onProgress?: (done: number, total: number) => void, progress = { done: 0, total: z.shape[2] }): void {
    const d = this.spec.decoder;
    const cache = new FeatureCache();
    try {
      let frame = 0;
      for (let k = 0; k < z.shape[2]; k++) {
        tidy(() => {
          const post = this.layers.conv(z.narrow(2, k, 1), this.spec.postQuantConv);
          const chunk = this.layers.decoder(post, d, cache, k === 0);
          emit(chunk, frame);
          frame += chunk.shape[2];
        });
        onProgress?.(++progress.done, progress.total);
      }
    } finally {
      cache.dispose();
    }
  }

  /**
   * diffusers' tiled_decode, streamed: tiles are decoded in row order and blended in place with the already blended
   * tile above (its bottom rows) and to the left (its right columns); then their stride x stride crop is final and
   * goes to the output. Only those two strips outlive a tile, so memory is one tile's working set plus the output.
   */
  private decodeTiled(z: Tensor, plan: TilePlan, out: Tensor, onProgress?: (done: number, total: number) => void): void {
    const [n, , t, h, w] = z.shape;
    const scale = convScale(this.config);
    const above = new Map<number, Tensor>();
    const progress = { done: 0, total: t * plan.rows.length * plan.cols.length };
    try {
      for (const i of plan.rows) {
        let left: Tensor | undefined;
        try {
          for (const j of plan.cols) {
            const th = Math.min(plan.latentTile, h - i) * scale;
            const tw = Math.min(plan.latentTile, w - j) * scale;
            const tile = zeros([n, this.spec.decoder.convOut.cout, this.framesFor(t), th, tw], { device: z.device });
            try {
              tidy(() => {
                const region = z.narrow(3, i, th / scale).narrow(4, j, tw / scale);
                this.decodeRegion(region, (chunk, frame) => copyInto(tile.narrow(2, frame, chunk.shape[2]), chunk), onProgress, progress);
              });
              const up = above.get(j);
              if (up) blendInto(tile, up, plan.blend, 3);
              if (left) blendInto(tile, left, plan.blend, 4);
              up?.dispose();
              above.set(j, narrowCopy(tile, 3, th - Math.min(plan.blend, th), Math.min(plan.blend, th)));
              left?.dispose();
              left = narrowCopy(tile, 4, tw - Math.min(plan.blend, tw), Math.min(plan.blend, tw));
              tidy(() => {
                const crop = tile.narrow(3, 0, Math.min(plan.stride, th)).narrow(4, 0, Math.min(plan.stride, tw));
                this.writeImage(out, crop, 0, i * scale, j * scale);
              });
            } finally {
              tile.dispose();
            }
          }
        } finally {
          left?.dispose();
        }
      }
    } finally {
      for (const s of above.values()) s.dispose();
    }
  }

  dispose(): void {
    for (const t of this.weights.values()) t.dispose();
  }
}

/**
 * diffusers' blend_v (dim 3) / blend_h (dim 4), in place on b: over the first e = min(a, b, extent) positions,
 * b[y] = a[-e + y] (1 - y / e) + b[y] (y / e). `strip` holds a's last positions along dim.
 */
function blendInto(b: Tensor, strip: Tensor, extent: number, dim: 3 | 4): void {
  const e = Math.min(strip.shape[dim], b.shape[dim], extent);
  if (e === 0) return;
  tidy(() => {
    const shape = [1, 1, 1, 1, 1];
    shape[dim] = e;
    const ramp = new Float32Array(e).map((_, y) => y / e);
    const r = tensor(ramp, { device: b.device }).reshape(shape);
    const rest = tensor(ramp.map((v) => 1 - v), { device: b.device }).reshape(shape);
    const a = strip.narrow(dim, strip.shape[dim] - e, e);
    const head = b.narrow(dim, 0, e);
    copyInto(head, a.mul(rest).add(head.mul(r)));
  });
}
