// AutoencoderKLWan (Wan2.1 / Wan2.2 / Qwen-Image VAE): causal chunked encode and decode with the feature cache,
// Wan2.2's 2x2 patchify, and diffusers' tiled_decode / tiled_encode, streamed so that only one tile's working set
// (plus the output and two thin blend strips) is alive. Both run as step generators that yield after each chunk
// and tile, so a caller can wait for the device between steps and report finished (not merely queued) work.
import { ShapeError } from '../../core/errors.js';
import { keep, tidy } from '../../core/scope.js';
import type { Tensor } from '../../core/tensor.js';
import { zeros } from '../../ops/creation.js';
import { copyInto } from '../../ops/shape-ops.js';
import type { WanVaeSpec } from './architecture.js';
import { compile, type CompiledFunction } from '../../compile/compile.js';
import { FeatureCache, narrowCopy, WanVaeLayers, type FeatureState } from './blocks.js';
import { convScale, temporalScale, type WanVaeConfig } from './config.js';
import { blendInto, decodeTilePlan, encodeTilePlan, type TilePlan, type TilingOptions } from './tiling.js';

export { DEFAULT_TILING, decodeTilePlan, encodeTilePlan, type TilePlan, type TilingOptions } from './tiling.js';

export interface CodecOptions {
  /** Work in overlapping spatial tiles when the input is larger than one tile (diffusers' enable_tiling()); true
   * takes diffusers' default sizes. */
  tiling?: boolean | TilingOptions;
}
export interface DecodeOptions extends CodecOptions {
  /**
   * Run each chunk's decoder through compile() (the VAE keeps it): chunks of one shape and cache state share a
   * signature, and from the fourth latent frame on every chunk of a region has the same one (traced at the fourth,
   * recorded at the fifth, replayed after, and across decodes and same-sized tiles). The frames are the eager ones
   * bit for bit.
   */
  compile?: boolean;
}
export type EncodeOptions = CodecOptions;

/** Work done so far: chunks (a latent frame to decode; 1, then 4 frames to encode) over all tiles, and tiles. */
export interface CodecProgress {
  readonly chunks: number;
  readonly totalChunks: number;
  readonly tiles: number;
  readonly totalTiles: number;
}

/** A decode or encode in steps: each next() queues one chunk (or finishes a tile); the return value is the result. */
export type CodecSteps = Generator<CodecProgress, Tensor, void>;

class Counter {
  chunks = 0;
  tiles = 0;
  constructor(
    readonly totalChunks: number,
    readonly totalTiles: number,
  ) {}
  snapshot(): CodecProgress {
    return { chunks: this.chunks, totalChunks: this.totalChunks, tiles: this.tiles, totalTiles: this.totalTiles };
  }
}

/** Runs steps to the end synchronously (everything queued; read the result to wait for it). */
export function runSteps(steps: CodecSteps): Tensor {
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
  }
}

/** [B, C, F, H, W] -> [B, C p^2, F, H/p, W/p] with diffusers' channel order (c, w-offset, h-offset). */
export function patchify(x: Tensor, p: number): Tensor {
  if (p === 1) return x.narrow(0, 0, x.shape[0]);
  const [n, c, f, h, w] = x.shape;
  if (h % p !== 0 || w % p !== 0) throw new ShapeError(`patchify: height ${h} and width ${w} must be multiples of the patch size ${p}`);
  return tidy(() =>
    x
      .reshape([n, c, f, h / p, p, w / p, p])
      .permute([0, 1, 6, 4, 2, 3, 5])
      .reshape([n, c * p * p, f, h / p, w / p]),
  );
}

const tilingOf = (t: CodecOptions['tiling']) => (t === true ? {} : t || undefined);

/** One decoder chunk as a function of tensors and plain data (the cache's state in and out), for compile(). */
type ChunkFn = (post: Tensor, first: boolean, state: FeatureState) => { chunk: Tensor; state: FeatureState };

/**
 * Chunk signatures kept: per tile size the first three chunks (their cache shapes still growing) and the steady
 * state (the fourth chunk on); 16 covers an untiled decode and the few tile sizes a tiled one has.
 */
const COMPILED_CHUNK_SIGNATURES = 16;

export class WanVae {
  private readonly layers: WanVaeLayers;
  private compiledChunk?: CompiledFunction<Parameters<ChunkFn>, ReturnType<ChunkFn>>;

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
   * device. Queued, not awaited: read the result to wait for it.
   */
  decode(z: Tensor, options: DecodeOptions = {}): Tensor {
    return runSteps(this.decodeSteps(z, options));
  }

  /**
   * decode() in steps (input checked now). Each decoded chunk (or blended tile crop) is clamped and written straight
   * into the output in image layout (unpatchified by the copy's strides), so no full-size temporary exists besides
   * the output. The result is the caller's to dispose, also when it stops early (call return()).
   */
  decodeSteps(z: Tensor, options: DecodeOptions = {}): CodecSteps {
    const zDim = this.config.zDim;
    if (z.ndim !== 5 || z.shape[1] !== zDim) throw new ShapeError(`WanVae.decode: latents must be [B, ${zDim}, T, h, w], got ${z.describe()}`);
    if (z.shape.some((s) => s === 0)) throw new ShapeError(`WanVae.decode: latents ${z.describe()} are empty`);
    const tiling = tilingOf(options.tiling);
    const plan = tiling ? decodeTilePlan(this.config, z.shape[3], z.shape[4], tiling) : undefined;
    return this.decodeGen(z, plan, options.compile ?? false);
  }

  /** What compile() says about the compiled chunk decoder (DecodeOptions.compile), or undefined before its first use. */
  explainCompiled(): string | undefined {
    return this.compiledChunk?.explain();
  }

  private *decodeGen(z: Tensor, plan: TilePlan | undefined, compiled: boolean): CodecSteps {
    const [n, , t, h, w] = z.shape;
    const s = this.spatialScale;
    const tiles = plan ? plan.rows.origins.length * plan.cols.origins.length : 1;
    const counter = new Counter(t * tiles, tiles);
    const out = keep(zeros([n, this.imageChannels, this.framesFor(t), h * s, w * s], { device: z.device }));
    let done = false;
    try {
      if (plan) {
        // diffusers clamps the blended video in AutoencoderKLWan.tiled_decode, but AutoencoderKLQwenImage.tiled_decode
        // returns it unclamped (only its untiled _decode clamps); follow each.
        const clamp = this.config.family !== 'qwen-image';
        yield* this.blendTiles(
          plan,
          counter,
          (i, j) => this.decodeTile(z, i, j, plan, counter, compiled),
          (crop, y, x) => this.writeImage(out, crop, 0, y, x, clamp),
        );
      } else {
        yield* this.decodeChunks(z, (chunk, frame) => this.writeImage(out, chunk, frame, 0, 0, true), counter, compiled);
        counter.tiles++;
        yield counter.snapshot();
      }
      done = true;
      return out;
    } finally {
      if (!done) out.dispose();
    }
  }

  /** Decodes the latent tile at (i, j) (latent pixels) into a new tensor in decoder layout [B, Cd, F, th, tw]. */
  private *decodeTile(z: Tensor, i: number, j: number, plan: TilePlan, counter: Counter, compiled: boolean): Generator<CodecProgress, Tensor, void> {
    const [n, , t, h, w] = z.shape;
    const c = convScale(this.config);
    const [rh, rw] = [Math.min(plan.rows.tile, h - i), Math.min(plan.cols.tile, w - j)];
    const region = keep(tidy(() => z.narrow(3, i, rh).narrow(4, j, rw)));
    const tile = keep(zeros([n, this.spec.decoder.convOut.cout, this.framesFor(t), rh * c, rw * c], { device: z.device }));
    let done = false;
    try {
      yield* this.decodeChunks(region, (chunk, frame) => copyInto(tile.narrow(2, frame, chunk.shape[2]), chunk), counter, compiled);
      done = true;
      return tile;
    } finally {
      region.dispose();
      if (!done) tile.dispose();
    }
  }

  /** Clamps decoder output [B, Cd, Tc, hd, wd] (unless told not to) and copies it, unpatchified, into out at (frame, y, x) (decoder pixels). */
  private writeImage(out: Tensor, src: Tensor, frame: number, y: number, x: number, clamp: boolean): void {
    const p = this.config.patchSize;
    const [n, cd, tc, hd, wd] = src.shape;
    const c = cd / (p * p);
    tidy(() => {
      const values = clamp ? src.maximum(-1).minimum(1) : src;
      const region = out
        .narrow(2, frame, tc)
        .narrow(3, y * p, hd * p)
        .narrow(4, x * p, wd * p);
      // diffusers' unpatchify: out[c, f, h p + b, w p + a] = x[c p^2 + a p + b, f, h, w].
      const dst = region.view([n, c, tc, hd, p, wd, p]).permute([0, 1, 6, 4, 2, 3, 5]);
      copyInto(dst, values.view([n, c, p, p, tc, hd, wd]));
    });
  }

  /** Decodes a latent region chunk by chunk (one latent frame each), handing each chunk and its first frame to emit. */
  private *decodeChunks(z: Tensor, emit: (chunk: Tensor, frame: number) => void, counter: Counter, compiled = false): Generator<CodecProgress, void, void> {
    const d = this.spec.decoder;
    const cache = new FeatureCache();
    try {
      let frame = 0;
      for (let k = 0; k < z.shape[2]; k++) {
        tidy(() => {
          // The post-quant conv reads the latent frame where it lies (a view whose offset moves with k), so it stays
          // outside the compiled chunk: its contiguous result is the same input for every chunk's signature.
          const post = this.layers.conv(z.narrow(2, k, 1), this.spec.postQuantConv);
          let chunk: Tensor;
          if (compiled) {
            const result = this.chunkDecoder()(post, k === 0, cache.state());
            cache.adopt(result.state);
            chunk = result.chunk;
          } else chunk = this.layers.decoder(post, d, cache, k === 0);
          emit(chunk, frame);
          frame += chunk.shape[2];
        });
        counter.chunks++;
        yield counter.snapshot();
      }
    } finally {
      cache.dispose();
    }
  }

  /**
   * The decoder over one chunk as a function of its state: the cache's frames go in as arguments and the new ones
   * come out, so no tensor a chunk reads is replaced behind compile()'s back (a replay reads its inputs, not the
   * closure's), and a chunk's signature says which convs have frames and how many.
   */
  private chunkDecoder(): NonNullable<WanVae['compiledChunk']> {
    const d = this.spec.decoder;
    this.compiledChunk ??= compile(
      (post: Tensor, first: boolean, state: FeatureState) => {
        const cache = FeatureCache.borrowing(state);
        const chunk = this.layers.decoder(post, d, cache, first);
        return { chunk, state: cache.state() };
      },
      { label: 'vae decode chunk', maxSignatures: COMPILED_CHUNK_SIGNATURES },
    );
    return this.compiledChunk;
  }

  /**
   * Video [B, C, F, H, W] in [-1, 1] (F = 1 + 4k, H and W multiples of spatialScale) -> the latent posterior's mean
   * [B, zDim, 1 + k, H / scale, W / scale]. Queued, not awaited.
   */
  encode(x: Tensor, options: EncodeOptions = {}): Tensor {
    return runSteps(this.encodeSteps(x, options));
  }

  /** encode() in steps (input checked now); tiled like diffusers' tiled_encode above a size when tiling is asked for. */
  encodeSteps(x: Tensor, options: EncodeOptions = {}): CodecSteps {
    const [n, c, f, h, w] = x.shape;
    const s = this.spatialScale;
    const ts = this.temporalScale;
    if (x.ndim !== 5 || c !== this.imageChannels) throw new ShapeError(`WanVae.encode: video must be [B, ${this.imageChannels}, F, H, W], got ${x.describe()}`);
    if (f < 1 || (f - 1) % ts !== 0) throw new ShapeError(`WanVae.encode: frame count ${f} must be 1 + ${ts}k`);
    if (h % s !== 0 || w % s !== 0 || h === 0 || w === 0 || n === 0)
      throw new ShapeError(`WanVae.encode: height ${h} and width ${w} must be positive multiples of ${s}`);
    const tiling = tilingOf(options.tiling);
    const plan = tiling ? encodeTilePlan(this.config, h, w, tiling) : undefined;
    return this.encodeGen(x, plan);
  }

  private *encodeGen(x: Tensor, plan: TilePlan | undefined): CodecSteps {
    const [n, , f, h, w] = x.shape;
    const s = this.spatialScale;
    const latentFrames = 1 + (f - 1) / this.temporalScale;
    const tiles = plan ? plan.rows.origins.length * plan.cols.origins.length : 1;
    const counter = new Counter(latentFrames * tiles, tiles);
    const out = keep(zeros([n, this.config.zDim, latentFrames, h / s, w / s], { device: x.device }));
    const xp = keep(patchify(x, this.config.patchSize));
    let done = false;
    try {
      if (plan) {
        yield* this.blendTiles(
          plan,
          counter,
          (i, j) => this.encodeTile(xp, i, j, plan, counter),
          (crop, y, xo) => copyInto(out.narrow(3, y, crop.shape[3]).narrow(4, xo, crop.shape[4]), crop),
        );
      } else {
        yield* this.encodeChunks(xp, (mean, frame) => copyInto(out.narrow(2, frame, mean.shape[2]), mean), counter);
        counter.tiles++;
        yield counter.snapshot();
      }
      done = true;
      return out;
    } finally {
      xp.dispose();
      if (!done) out.dispose();
    }
  }

  /** Encodes the patchified tile at (i, j) into a new tensor [B, zDim, T, th, tw] (the posterior mean). */
  private *encodeTile(xp: Tensor, i: number, j: number, plan: TilePlan, counter: Counter): Generator<CodecProgress, Tensor, void> {
    const [n, , f, hp, wp] = xp.shape;
    const c = convScale(this.config);
    const [rh, rw] = [Math.min(plan.rows.tile, hp - i), Math.min(plan.cols.tile, wp - j)];
    const region = keep(tidy(() => xp.narrow(3, i, rh).narrow(4, j, rw)));
    const tile = keep(zeros([n, this.config.zDim, 1 + (f - 1) / this.temporalScale, rh / c, rw / c], { device: xp.device }));
    let done = false;
    try {
      yield* this.encodeChunks(region, (mean, frame) => copyInto(tile.narrow(2, frame, mean.shape[2]), mean), counter);
      done = true;
      return tile;
    } finally {
      region.dispose();
      if (!done) tile.dispose();
    }
  }

  /**
   * Encodes patchified video chunk by chunk (frame 0, then 4 frames at a time) through the encoder and quant_conv,
   * handing each chunk's posterior mean (the first zDim moments) and its latent frame to emit. quant_conv is 1x1x1,
   * so applying it per chunk (as tiled_encode does) equals applying it to the concatenation (as _encode does).
   */
  private *encodeChunks(xp: Tensor, emit: (mean: Tensor, frame: number) => void, counter: Counter): Generator<CodecProgress, void, void> {
    const f = xp.shape[2];
    const ts = this.temporalScale;
    const cache = new FeatureCache();
    try {
      let frame = 0;
      for (let start = 0; start < f; start = start === 0 ? 1 : start + ts) {
        tidy(() => {
          const moments = this.layers.encoder(xp.narrow(2, start, start === 0 ? 1 : ts), this.spec.encoder, cache);
          const q = this.layers.conv(moments, this.spec.quantConv);
          emit(q.narrow(1, 0, this.config.zDim), frame);
          frame += q.shape[2];
        });
        counter.chunks++;
        yield counter.snapshot();
      }
    } finally {
      cache.dispose();
    }
  }

  /**
   * diffusers' tiled_decode / tiled_encode loop, streamed: tiles are made in row order and blended in place with the
   * already blended tile above (its last rows) and to the left (its last columns), as diffusers' in-place blend_v /
   * blend_h leave them; then the tile's crop is final and goes to write at its place in the output. Only those
   * strips outlive a tile, so memory is one tile's working set plus the output.
   */
  private *blendTiles(
    plan: TilePlan,
    counter: Counter,
    makeTile: (i: number, j: number) => Generator<CodecProgress, Tensor, void>,
    write: (crop: Tensor, y: number, x: number) => void,
  ): Generator<CodecProgress, void, void> {
    const { rows, cols } = plan;
    const above = new Map<number, Tensor>();
    try {
      for (let a = 0; a < rows.origins.length; a++) {
        let left: Tensor | undefined;
        try {
          for (let b = 0; b < cols.origins.length; b++) {
            const tile = yield* makeTile(rows.origins[a], cols.origins[b]);
            try {
              const [th, tw] = [tile.shape[3], tile.shape[4]];
              const up = above.get(b);
              if (up) blendInto(tile, up, rows.blend, 3);
              if (left) blendInto(tile, left, cols.blend, 4);
              up?.dispose();
              above.delete(b);
              left?.dispose();
              left = undefined;
              if (rows.blend > 0) above.set(b, lastStrip(tile, 3, rows.blend));
              if (cols.blend > 0) left = lastStrip(tile, 4, cols.blend);
              tidy(() => write(tile.narrow(3, 0, Math.min(rows.crop, th)).narrow(4, 0, Math.min(cols.crop, tw)), a * rows.crop, b * cols.crop));
            } finally {
              tile.dispose();
            }
            counter.tiles++;
            yield counter.snapshot();
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
    this.compiledChunk?.reset();
    this.compiledChunk = undefined;
    for (const t of this.weights.values()) t.dispose();
  }
}

/** The last min(blend, extent) positions of t along dim, as a copy that outlives every scope. */
function lastStrip(t: Tensor, dim: 3 | 4, blend: number): Tensor {
  const e = Math.min(blend, t.shape[dim]);
  return keep(narrowCopy(t, dim, t.shape[dim] - e, e));
}
