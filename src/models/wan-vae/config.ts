// diffusers' AutoencoderKLWan config.json -> a typed, validated config (Wan2.1, Wan2.2 and the Qwen-Image VAE,
// which reuses Wan2.1's), and back (for the random-weight generator). Every field is checked and named in errors.
import { CheckpointError } from '../../core/errors.js';

export interface WanVaeConfig {
  /** Encoder channel base (96 for Wan2.1, 160 for Wan2.2). */
  readonly baseDim: number;
  /** Decoder channel base (Wan2.2: 256); defaults to baseDim. */
  readonly decoderBaseDim: number;
  /** Latent channels (16 for Wan2.1, 48 for Wan2.2). */
  readonly zDim: number;
  readonly dimMult: readonly number[];
  readonly numResBlocks: number;
  /** Scales (1, 0.5, ...) whose encoder stages get attention blocks (none in released models). */
  readonly attnScales: readonly number[];
  /** Per down stage, whether it also halves time (the decoder mirrors it). */
  readonly temperalDownsample: readonly boolean[];
  /** Wan2.2's residual down/up blocks (AvgDown3D / DupUp3D shortcuts). */
  readonly isResidual: boolean;
  /** Pixels are folded 2x2 into channels before the encoder and unfolded after the decoder (Wan2.2). */
  readonly patchSize: number;
  /** Image channels as given in config.json; with patchSize > 1, diffusers versions disagree on whether this
   * counts the folded channels, so the model takes the real counts from conv_in / conv_out's weight shapes. */
  readonly inChannels: number;
  readonly outChannels: number;
  /** The pipeline's latent normalization (z_normalized = (z - mean) / std), one per latent channel. */
  readonly latentsMean?: readonly number[];
  readonly latentsStd?: readonly number[];
}

/** Spatial downscale of the convolutions alone (patchify adds patchSize on top). */
export function convScale(config: WanVaeConfig): number {
  return 2 ** (config.dimMult.length - 1);
}

/** Pixels per latent along height and width. */
export function spatialScale(config: WanVaeConfig): number {
  return convScale(config) * config.patchSize;
}

/** Frames: 1 + temporalScale * (latent frames - 1). */
export function temporalScale(config: WanVaeConfig): number {
  return 2 ** config.temperalDownsample.filter(Boolean).length;
}

type Json = Record<string, unknown>;

function field<T>(raw: Json, file: string, key: string, check: (v: unknown) => v is T, what: string, fallback?: T): T {
  const v = raw[key];
  if (v === undefined || v === null) {
    if (fallback !== undefined) return fallback;
    throw new CheckpointError(`config field '${key}' is missing (expected ${what})`, { file });
  }
  if (!check(v)) throw new CheckpointError(`config field '${key}' must be ${what}, got ${JSON.stringify(v)}`, { file });
  return v;
}

const isPositiveInt = (v: unknown): v is number => Number.isInteger(v) && (v as number) > 0;
const isNonNegativeInt = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 0;
const isBool = (v: unknown): v is boolean => typeof v === 'boolean';
const isPositiveIntList = (v: unknown): v is number[] => Array.isArray(v) && v.length > 0 && v.every(isPositiveInt);
const isNumberList = (v: unknown): v is number[] => Array.isArray(v) && v.every((x) => typeof x === 'number' && Number.isFinite(x));
const isBoolList = (v: unknown): v is boolean[] => Array.isArray(v) && v.every(isBool);

/** Validates a parsed AutoencoderKLWan config.json; `file` names it in errors. */
export function parseWanVaeConfig(raw: unknown, file = 'config.json'): WanVaeConfig {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new CheckpointError('config.json must hold a JSON object', { file });
  const j = raw as Json;
  if (j._class_name !== undefined && j._class_name !== 'AutoencoderKLWan') {
    throw new CheckpointError(`config is for '${String(j._class_name)}', not AutoencoderKLWan`, { file });
  }
  const baseDim = field(j, file, 'base_dim', isPositiveInt, 'a positive integer', 96);
  const dimMult = field(j, file, 'dim_mult', isPositiveIntList, 'a non-empty list of positive integers', [1, 2, 4, 4]);
  const temperalDownsample = field(j, file, 'temperal_downsample', isBoolList, 'a list of booleans', [false, true, true]);
  if (temperalDownsample.length !== dimMult.length - 1) {
    throw new CheckpointError(`config field 'temperal_downsample' needs ${dimMult.length - 1} entries (one per down stage of dim_mult ${JSON.stringify(dimMult)}), got ${temperalDownsample.length}`, { file });
  }
  const zDim = field(j, file, 'z_dim', isPositiveInt, 'a positive integer', 16);
  const patchRaw = j.patch_size;
  const patchSize = patchRaw === undefined || patchRaw === null ? 1 : field(j, file, 'patch_size', isPositiveInt, 'a positive integer or null');
  const dropout = j.dropout;
  if (dropout !== undefined && typeof dropout !== 'number') throw new CheckpointError(`config field 'dropout' must be a number, got ${JSON.stringify(dropout)}`, { file });
  const latentsMean = j.latents_mean === undefined ? undefined : field(j, file, 'latents_mean', isNumberList, 'a list of numbers');
  const latentsStd = j.latents_std === undefined ? undefined : field(j, file, 'latents_std', isNumberList, 'a list of numbers');
  for (const [key, list] of [['latents_mean', latentsMean], ['latents_std', latentsStd]] as const) {
    if (list && list.length !== zDim) throw new CheckpointError(`config field '${key}' has ${list.length} entries, z_dim is ${zDim}`, { file });
  }
  if (latentsStd?.some((s) => s === 0)) throw new CheckpointError(`config field 'latents_std' has a zero entry`, { file });
  return {
    baseDim,
    decoderBaseDim: j.decoder_base_dim === null ? baseDim : field(j, file, 'decoder_base_dim', isPositiveInt, 'a positive integer', baseDim),
    zDim,
    dimMult,
    numResBlocks: field(j, file, 'num_res_blocks', isNonNegativeInt, 'a non-negative integer', 2),
    attnScales: field(j, file, 'attn_scales', isNumberList, 'a list of numbers', []),
    temperalDownsample,
    isResidual: field(j, file, 'is_residual', isBool, 'a boolean', false),
    patchSize,
    inChannels: field(j, file, 'in_channels', isPositiveInt, 'a positive integer', 3),
    outChannels: field(j, file, 'out_channels', isPositiveInt, 'a positive integer', 3),
    latentsMean,
    latentsStd,
  };
}

/** config.json as diffusers writes it. */
export function toDiffusersConfig(c: WanVaeConfig): Record<string, unknown> {
  return {
    _class_name: 'AutoencoderKLWan',
    attn_scales: c.attnScales,
    base_dim: c.baseDim,
    decoder_base_dim: c.decoderBaseDim === c.baseDim ? null : c.decoderBaseDim,
    dim_mult: c.dimMult,
    dropout: 0,
    in_channels: c.inChannels,
    is_residual: c.isResidual,
    latents_mean: c.latentsMean,
    latents_std: c.latentsStd,
    num_res_blocks: c.numResBlocks,
    out_channels: c.outChannels,
    patch_size: c.patchSize > 1 ? c.patchSize : null,
    scale_factor_spatial: spatialScale(c),
    scale_factor_temporal: temporalScale(c),
    temperal_downsample: c.temperalDownsample,
    z_dim: c.zDim,
  };
}
