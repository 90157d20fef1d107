// config.json of diffusers' two video VAE classes as the Hub ships them (AutoencoderKLWan for Wan2.1 / Wan2.2,
// AutoencoderKLQwenImage for Qwen-Image): parsed onto one architecture, written back with each class's own keys, and
// refused with the offending value named (unknown class, scale factors that disagree with the layers, null latents).
import { describe, expect, it } from 'vitest';
import { parseWanVaeConfig, spatialScale, temporalScale, toDiffusersConfig } from '../../src/models/wan-vae/config.js';
import { WAN_VAE_PRESETS } from '../../src/models/wan-vae/random-checkpoint.js';

const WAN21_MEAN = [-0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508, 0.4134, -0.0715, 0.5517, -0.3632, -0.1922, -0.9497, 0.2503, -0.2921];
const WAN21_STD = [2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743, 3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.916];

/** Qwen/Qwen-Image vae/config.json (saved before diffusers added input_channels). */
const QWEN_IMAGE = {
  _class_name: 'AutoencoderKLQwenImage',
  _diffusers_version: '0.34.0.dev0',
  attn_scales: [],
  base_dim: 96,
  dim_mult: [1, 2, 4, 4],
  dropout: 0.0,
  latents_mean: WAN21_MEAN,
  latents_std: WAN21_STD,
  num_res_blocks: 2,
  temperal_downsample: [false, true, true],
  z_dim: 16,
};

/** Wan-AI/Wan2.1-T2V-1.3B-Diffusers vae/config.json. */
const WAN21 = { ...QWEN_IMAGE, _class_name: 'AutoencoderKLWan', _diffusers_version: '0.33.0.dev0' };

/** Wan-AI/Wan2.2-TI2V-5B-Diffusers vae/config.json. */
const WAN22 = {
  _class_name: 'AutoencoderKLWan',
  _diffusers_version: '0.35.0.dev0',
  attn_scales: [],
  base_dim: 160,
  decoder_base_dim: 256,
  dim_mult: [1, 2, 4, 4],
  dropout: 0.0,
  in_channels: 12,
  is_residual: true,
  latents_mean: [
    -0.2289, -0.0052, -0.1323, -0.2339, -0.2799, 0.0174, 0.1838, 0.1557, -0.1382, 0.0542, 0.2813, 0.0891, 0.157, -0.0098, 0.0375, -0.1825, -0.2246, -0.1207,
    -0.0698, 0.5109, 0.2665, -0.2108, -0.2158, 0.2502, -0.2055, -0.0322, 0.1109, 0.1567, -0.0729, 0.0899, -0.2799, -0.123, -0.0313, -0.1649, 0.0117, 0.0723,
    -0.2839, -0.2083, -0.052, 0.3748, 0.0152, 0.1957, 0.1433, -0.2944, 0.3573, -0.0548, -0.1681, -0.0667,
  ],
  latents_std: [
    0.4765, 1.0364, 0.4514, 1.1677, 0.5313, 0.499, 0.4818, 0.5013, 0.8158, 1.0344, 0.5894, 1.0901, 0.6885, 0.6165, 0.8454, 0.4978, 0.5759, 0.3523, 0.7135,
    0.6804, 0.5833, 1.4146, 0.8986, 0.5659, 0.7069, 0.5338, 0.4889, 0.4917, 0.4069, 0.4999, 0.6866, 0.4093, 0.5709, 0.6065, 0.6415, 0.4944, 0.5726, 1.2042,
    0.5458, 1.6887, 0.3971, 1.06, 0.3943, 0.5537, 0.5444, 0.4089, 0.7468, 0.7744,
  ],
  num_res_blocks: 2,
  out_channels: 12,
  patch_size: 2,
  scale_factor_spatial: 16,
  scale_factor_temporal: 4,
  temperal_downsample: [false, true, true],
  z_dim: 48,
};

/** AutoencoderKLQwenImage.__init__'s arguments (diffusers 58eb52c), which save_pretrained writes and nothing else. */
const QWEN_KEYS = [
  'attn_scales',
  'base_dim',
  'dim_mult',
  'dropout',
  'input_channels',
  'latents_mean',
  'latents_std',
  'num_res_blocks',
  'temperal_downsample',
  'z_dim',
];

describe('VAE config.json of diffusers AutoencoderKLWan and AutoencoderKLQwenImage', () => {
  it("parses the Hub's Qwen-Image, Wan2.1 and Wan2.2 files onto one architecture", () => {
    const qwen = parseWanVaeConfig(QWEN_IMAGE);
    const wan21 = parseWanVaeConfig(WAN21);
    expect(qwen.family).toBe('qwen-image');
    expect(wan21.family).toBe('wan');
    // The same module tree: only the family (the tiled-decode clamp) tells them apart.
    expect({ ...qwen, family: 'wan' }).toEqual(wan21);
    expect(qwen).toMatchObject({
      baseDim: 96,
      decoderBaseDim: 96,
      zDim: 16,
      patchSize: 1,
      isResidual: false,
      inChannels: 3,
      outChannels: 3,
      latentsMean: WAN21_MEAN,
    });
    const wan22 = parseWanVaeConfig(WAN22);
    expect(wan22).toMatchObject({ family: 'wan', baseDim: 160, decoderBaseDim: 256, zDim: 48, patchSize: 2, isResidual: true, inChannels: 12 });
    expect([spatialScale(wan22), temporalScale(wan22)]).toEqual([16, 4]);
    expect([spatialScale(qwen), temporalScale(qwen)]).toEqual([8, 4]);
  });

  it("takes Qwen-Image's input_channels for both ends (RGBA for Qwen-Image-Layered) and ignores Wan-only keys, as diffusers does", () => {
    expect(parseWanVaeConfig({ ...QWEN_IMAGE, input_channels: 4 })).toMatchObject({ inChannels: 4, outChannels: 4 });
    const withWanKeys = parseWanVaeConfig({
      ...QWEN_IMAGE,
      in_channels: 12,
      out_channels: 12,
      patch_size: 2,
      is_residual: true,
      decoder_base_dim: 256,
      scale_factor_spatial: 16,
    });
    expect(withWanKeys).toEqual(parseWanVaeConfig(QWEN_IMAGE));
  });

  it('writes each preset back with its own class and keys, and parses it to the same config', () => {
    for (const [name, preset] of Object.entries(WAN_VAE_PRESETS)) {
      const written = toDiffusersConfig(preset);
      expect(written._class_name, name).toBe(preset.family === 'qwen-image' ? 'AutoencoderKLQwenImage' : 'AutoencoderKLWan');
      expect(parseWanVaeConfig(JSON.parse(JSON.stringify(written))), name).toEqual(preset);
    }
    const qwen = toDiffusersConfig(WAN_VAE_PRESETS['qwen-image']);
    expect(
      Object.keys(qwen)
        .filter((k) => k !== '_class_name')
        .sort(),
    ).toEqual(QWEN_KEYS);
    expect(() => toDiffusersConfig({ ...WAN_VAE_PRESETS['qwen-image-tiny'], patchSize: 2 })).toThrow(/AutoencoderKLQwenImage has no patch_size/);
  });

  it('names an unsupported _class_name and the supported ones', () => {
    expect(() => parseWanVaeConfig({ ...WAN21, _class_name: 'AutoencoderKLCosmos' }, 'vae/config.json')).toThrow(
      /vae\/config.json: config is for "AutoencoderKLCosmos", which is not a supported VAE \(supported _class_name: AutoencoderKLWan, AutoencoderKLQwenImage\)/,
    );
    expect(() => parseWanVaeConfig({ ...WAN21, _class_name: 7 })).toThrow(/config is for 7, .*AutoencoderKLWan, AutoencoderKLQwenImage/);
  });

  it('refuses scale_factor_spatial / scale_factor_temporal that disagree with the layers, naming both values', () => {
    expect(() => parseWanVaeConfig({ ...WAN22, scale_factor_spatial: 8 })).toThrow(
      /'scale_factor_spatial' is 8, but the architecture scales by 16 \(dim_mult \[1,2,4,4\]: 3 2x down stages, then patch_size 2\)/,
    );
    expect(() => parseWanVaeConfig({ ...WAN21, scale_factor_spatial: 16 })).toThrow(/'scale_factor_spatial' is 16, but the architecture scales by 8/);
    expect(() => parseWanVaeConfig({ ...WAN21, scale_factor_temporal: 8 })).toThrow(
      /'scale_factor_temporal' is 8, but the architecture scales by 4 \(temperal_downsample \[false,true,true\]\)/,
    );
    expect(() => parseWanVaeConfig({ ...WAN21, temperal_downsample: [false, false, true], scale_factor_temporal: 4 })).toThrow(
      /'scale_factor_temporal' is 4, but the architecture scales by 2/,
    );
    expect(() => parseWanVaeConfig({ ...WAN21, scale_factor_spatial: 'eight' })).toThrow(/'scale_factor_spatial' must be a positive integer, got "eight"/);
    // Agreeing, absent or null (diffusers' None) values are fine.
    expect(parseWanVaeConfig({ ...WAN21, scale_factor_spatial: 8, scale_factor_temporal: 4 }).family).toBe('wan');
    expect(parseWanVaeConfig({ ...WAN22, scale_factor_spatial: null, scale_factor_temporal: null }).patchSize).toBe(2);
  });

  it('says what latents_mean / latents_std must be when they are null, and counts entries against z_dim', () => {
    for (const key of ['latents_mean', 'latents_std']) {
      const run = () => parseWanVaeConfig({ ...WAN21, [key]: null });
      expect(run).toThrow(new RegExp(`'${key}' is null; expected a list of 16 numbers \\(one per latent channel, z_dim 16\\), or no '${key}' field at all`));
      expect(run).not.toThrow(/missing/);
    }
    expect(() => parseWanVaeConfig({ ...WAN22, latents_mean: WAN21_MEAN })).toThrow(/'latents_mean' has 16 entries, z_dim is 48/);
    expect(parseWanVaeConfig({ ...WAN21, latents_mean: undefined, latents_std: undefined }).latentsMean).toBeUndefined();
  });
});
