// diffusers' AutoencoderKLWan (Wan2.1, Wan2.2) and AutoencoderKLQwenImage config.json -> a typed, validated config,
// and back (for the random-weight generator). Every field is checked and named in errors.
//
// The Qwen-Image class is Wan2.1's module tree under other Python class names: the same safetensors names and
// shapes, so both map onto one architecture. Its config differs: `input_channels` sets both the encoder's input and
// the decoder's output (3, or 4 for Qwen-Image-Layered's RGBA); it has none of Wan's `in_channels` /
// `out_channels`, `decoder_base_dim`, `is_residual`, `patch_size` or `scale_factor_*` (diffusers ignores such keys
// for it, and so does this parser), and its spatial ratio is 2 ** len(temperal_downsample).
import { CheckpointError } from '../../core/errors.js';

/** diffusers class name (config.json's `_class_name`) -> family. */
export const VAE_CLASSES = { AutoencoderKLWan: 'wan', AutoencoderKLQwenImage: 'qwen-image' } as const;
export type VaeClassName = keyof typeof VAE_CLASSES;
export type VaeFamily = (typeof VAE_CLASSES)[VaeClassName];

export interface WanVaeConfig {
  /** Which diffusers class the folder is for; 'qwen-image' tiles like diffusers' Qwen-Image (no clamp after blending). */
  readonly family: VaeFamily;
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
  /** Image channels as given in config.json (Qwen-Image: input_channels for both); with patchSize > 1, diffusers
   * versions disagree on whether this counts the folded channels, so the model takes the real counts from conv_in /
   * conv_out's weight shapes. */
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

/** A field, or its fallback when absent; null counts as absent only where `nullMeansFallback` (diffusers' `None`). */
function field<T>(raw: Json, file: string, key: string, check: (v: unknown) => v is T, what: string, fallback?: T, nullMeansFallback = true): T {
  const v = raw[key];
  if (v === undefined || (v === null && nullMeansFallback)) {
    if (fallback !== undefined) return fallback;
    throw new CheckpointError(`config field '${key}' is missing (expected ${what})`, { file });
  }
  if (v === null) throw new CheckpointError(`config field '${key}' is null; expected ${what}`, { file });
  if (!check(v)) throw new CheckpointError(`config field '${key}' must be ${what}, got ${JSON.stringify(v)}`, { file });
  return v;
}

const isPositiveInt = (v: unknown): v is number => Number.isInteger(v) && (v as number) > 0;
const isNonNegativeInt = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 0;
const isBool = (v: unknown): v is boolean => typeof v === 'boolean';
const isPositiveIntList = (v: unknown): v is number[] => Array.isArray(v) && v.length > 0 && v.every(isPositiveInt);
const isNumberList = (v: unknown): v is number[] => Array.isArray(v) && v.every((x) => typeof x === 'number' && Number.isFinite(x));
const isBoolList = (v: unknown): v is boolean[] => Array.isArray(v) && v.every(isBool);

const CLASS_NAMES = Object.keys(VAE_CLASSES) as VaeClassName[];

function familyOf(j: Json, file: string): VaeFamily {
  const name = j._class_name;
  if (name === undefined) return 'wan';
  if (typeof name === 'string' && Object.hasOwn(VAE_CLASSES, name)) return VAE_CLASSES[name as VaeClassName];
  throw new CheckpointError(`config is for ${JSON.stringify(name)}, which is not a supported VAE (supported _class_name: ${CLASS_NAMES.join(', ')})`, { file });
}

/** latents_mean / latents_std: absent is fine (no normalization known); null or a wrong length is not. */
function latentList(j: Json, file: string, key: 'latents_mean' | 'latents_std', zDim: number): number[] | undefined {
  if (j[key] === undefined) return undefined;
  const list = field(
    j,
    file,
    key,
    isNumberList,
    `a list of ${zDim} numbers (one per latent channel, z_dim ${zDim}), or no '${key}' field at all`,
    undefined,
    false,
  );
  if (list.length !== zDim) throw new CheckpointError(`config field '${key}' has ${list.length} entries, z_dim is ${zDim}`, { file });
  return list;
}

/**
 * diffusers' Wan uses scale_factor_spatial / _temporal for its tile grid and the pipelines for the latent size, so one
 * that disagrees with what the layers do would tile or size wrongly: an error, not a silent choice of one of them.
 */
function checkScaleFactor(j: Json, file: string, key: 'scale_factor_spatial' | 'scale_factor_temporal', actual: number, because: string): void {
  if (j[key] === undefined || j[key] === null) return;
  const v = field(j, file, key, isPositiveInt, 'a positive integer');
  if (v !== actual) throw new CheckpointError(`config field '${key}' is ${v}, but the architecture scales by ${actual} (${because})`, { file });
}

/** Validates a parsed AutoencoderKLWan or AutoencoderKLQwenImage config.json; `file` names it in errors. */
export function parseWanVaeConfig(raw: unknown, file = 'config.json'): WanVaeConfig {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new CheckpointError('config.json must hold a JSON object', { file });
  const j = raw as Json;
  const family = familyOf(j, file);
  const baseDim = field(j, file, 'base_dim', isPositiveInt, 'a positive integer', 96);
  const dimMult = field(j, file, 'dim_mult', isPositiveIntList, 'a non-empty list of positive integers', [1, 2, 4, 4]);
  const temperalDownsample = field(j, file, 'temperal_downsample', isBoolList, 'a list of booleans', [false, true, true]);
  if (temperalDownsample.length !== dimMult.length - 1) {
    throw new CheckpointError(
      `config field 'temperal_downsample' needs ${dimMult.length - 1} entries (one per down stage of dim_mult ${JSON.stringify(dimMult)}), got ${temperalDownsample.length}`,
      { file },
    );
  }
  const zDim = field(j, file, 'z_dim', isPositiveInt, 'a positive integer', 16);
  const dropout = j.dropout;
  if (dropout !== undefined && typeof dropout !== 'number')
    throw new CheckpointError(`config field 'dropout' must be a number, got ${JSON.stringify(dropout)}`, { file });
  const latentsMean = latentList(j, file, 'latents_mean', zDim);
  const latentsStd = latentList(j, file, 'latents_std', zDim);
  if (latentsStd?.some((s) => s === 0)) throw new CheckpointError(`config field 'latents_std' has a zero entry`, { file });
  const shared = {
    family,
    baseDim,
    zDim,
    dimMult,
    numResBlocks: field(j, file, 'num_res_blocks', isNonNegativeInt, 'a non-negative integer', 2),
    attnScales: field(j, file, 'attn_scales', isNumberList, 'a list of numbers', []),
    temperalDownsample,
    latentsMean,
    latentsStd,
  };
  if (family === 'qwen-image') {
    const channels = field(j, file, 'input_channels', isPositiveInt, 'a positive integer', 3);
    return { ...shared, decoderBaseDim: baseDim, isResidual: false, patchSize: 1, inChannels: channels, outChannels: channels };
  }
  const patchRaw = j.patch_size;
  const patchSize = patchRaw === undefined || patchRaw === null ? 1 : field(j, file, 'patch_size', isPositiveInt, 'a positive integer or null');
  const config: WanVaeConfig = {
    ...shared,
    decoderBaseDim: field(j, file, 'decoder_base_dim', isPositiveInt, 'a positive integer or null', baseDim),
    isResidual: field(j, file, 'is_residual', isBool, 'a boolean', false),
    patchSize,
    inChannels: field(j, file, 'in_channels', isPositiveInt, 'a positive integer', 3),
    outChannels: field(j, file, 'out_channels', isPositiveInt, 'a positive integer', 3),
  };
  const stages = `dim_mult ${JSON.stringify(dimMult)}: ${dimMult.length - 1} 2x down stages`;
  checkScaleFactor(j, file, 'scale_factor_spatial', spatialScale(config), patchSize > 1 ? `${stages}, then patch_size ${patchSize}` : stages);
  checkScaleFactor(j, file, 'scale_factor_temporal', temporalScale(config), `temperal_downsample ${JSON.stringify(temperalDownsample)}`);
  return config;
}

/** config.json as diffusers writes it for the config's class (every __init__ argument, sorted). */
export function toDiffusersConfig(c: WanVaeConfig): Record<string, unknown> {
  if (c.family === 'qwen-image') {
    if (c.patchSize !== 1 || c.isResidual || c.decoderBaseDim !== c.baseDim || c.inChannels !== c.outChannels) {
      throw new RangeError('toDiffusersConfig: AutoencoderKLQwenImage has no patch_size, is_residual, decoder_base_dim or separate in/out channels');
    }
    return {
      _class_name: 'AutoencoderKLQwenImage',
      attn_scales: c.attnScales,
      base_dim: c.baseDim,
      dim_mult: c.dimMult,
      dropout: 0,
      input_channels: c.inChannels,
      latents_mean: c.latentsMean,
      latents_std: c.latentsStd,
      num_res_blocks: c.numResBlocks,
      temperal_downsample: c.temperalDownsample,
      z_dim: c.zDim,
    };
  }
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
