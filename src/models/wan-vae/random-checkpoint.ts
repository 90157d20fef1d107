// Random-weight AutoencoderKLWan / AutoencoderKLQwenImage checkpoints in diffusers' layout (config.json +
// diffusion_pytorch_model.safetensors, optionally as the `vae/` of a pipeline folder) for tests, benchmarks and
// `tensorgpu vae-decode`'s built-in default. Values depend only on the seed and the tensor name (so a Qwen-Image and
// a Wan2.1 preset of one shape get the same weights), and each tensor is produced only when written.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { encodeValues } from '../../core/codecs.js';
import type { DType } from '../../core/dtype.js';
import { generatorFor } from '../../core/random.js';
import { writeCheckpoint } from '../../formats/checkpoint-writer.js';
import type { TensorSource } from '../../formats/safetensors-writer.js';
import { wanVaeSpec, wanVaeWeightSpecs, type VaeWeightSpec } from './architecture.js';
import { toDiffusersConfig, type WanVaeConfig } from './config.js';

const WAN21_LATENTS = {
  latentsMean: [-0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508, 0.4134, -0.0715, 0.5517, -0.3632, -0.1922, -0.9497, 0.2503, -0.2921],
  latentsStd: [2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743, 3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.916],
};

const WAN21_SHAPE = {
  family: 'wan' as const,
  dimMult: [1, 2, 4, 4],
  numResBlocks: 2,
  attnScales: [],
  temperalDownsample: [false, true, true],
  isResidual: false,
  patchSize: 1,
  inChannels: 3,
  outChannels: 3,
};

/**
 * The released architectures at full width and narrow versions of them for tests and benchmarks on any machine. In
 * the Wan2.2 configs in_channels counts the 2x2-folded channels, as the hub's config.json does. Qwen-Image's VAE is
 * Wan2.1's shape with Wan2.1's latent statistics (Qwen/Qwen-Image vae/config.json), written as AutoencoderKLQwenImage.
 */
export const WAN_VAE_PRESETS: Readonly<Record<string, WanVaeConfig>> = {
  'wan2.1': { ...WAN21_SHAPE, baseDim: 96, decoderBaseDim: 96, zDim: 16, ...WAN21_LATENTS },
  'wan2.2': { ...WAN21_SHAPE, baseDim: 160, decoderBaseDim: 256, zDim: 48, isResidual: true, patchSize: 2, inChannels: 12, outChannels: 12 },
  'wan2.1-tiny': { ...WAN21_SHAPE, baseDim: 8, decoderBaseDim: 8, zDim: 16, numResBlocks: 1, ...WAN21_LATENTS },
  'wan2.2-tiny': { ...WAN21_SHAPE, baseDim: 8, decoderBaseDim: 12, zDim: 8, numResBlocks: 1, isResidual: true, patchSize: 2, inChannels: 12, outChannels: 12 },
  'qwen-image': { ...WAN21_SHAPE, family: 'qwen-image', baseDim: 96, decoderBaseDim: 96, zDim: 16, ...WAN21_LATENTS },
  'qwen-image-tiny': { ...WAN21_SHAPE, family: 'qwen-image', baseDim: 8, decoderBaseDim: 8, zDim: 16, numResBlocks: 1, ...WAN21_LATENTS },
};

export interface RandomVaeOptions {
  dtype?: Extract<DType, 'float32' | 'float16' | 'bfloat16'>;
  seed?: number;
}

/** Conv weights uniform with variance 1 / fan-in (activations keep their scale), small biases, gammas near 1. */
function randomValues(spec: VaeWeightSpec, seed: number): Float32Array {
  const g = generatorFor(seed, spec.name);
  const n = spec.shape.reduce((a, b) => a * b, 1);
  const [center, std] = spec.role === 'gamma' ? [1, 0.1] : spec.role === 'bias' ? [0, 0.05] : [0, 1 / Math.sqrt(spec.fanIn ?? 1)];
  const width = 2 * Math.sqrt(3) * std;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = center + width * (g.uniform() - 0.5);
  return out;
}

export async function writeRandomWanVae(dir: string, config: WanVaeConfig, options: RandomVaeOptions = {}): Promise<void> {
  const dtype = options.dtype ?? 'bfloat16';
  const seed = options.seed ?? 1;
  const tensors = wanVaeWeightSpecs(wanVaeSpec(config)).map((s): [string, TensorSource] => {
    const bytes = () => {
      const a = encodeValues(dtype, randomValues(s, seed));
      return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
    };
    return [s.name, { dtype, shape: s.shape, bytes }];
  });
  await writeCheckpoint(dir, tensors, { config: toDiffusersConfig(config), stem: 'diffusion_pytorch_model' });
}

/** What a diffusers pipeline's model_index.json says about its VAE component, per family. */
const PIPELINES = {
  wan: { _class_name: 'WanPipeline', vae: ['diffusers', 'AutoencoderKLWan'] },
  'qwen-image': { _class_name: 'QwenImagePipeline', vae: ['diffusers', 'AutoencoderKLQwenImage'] },
} as const;

/**
 * A pipeline folder as on the Hub (Wan-AI/Wan2.1-T2V-1.3B-Diffusers, Qwen/Qwen-Image): model_index.json and the VAE
 * in `vae/`. Only the VAE component is written (model_index.json lists only it).
 */
export async function writeRandomVaePipeline(dir: string, config: WanVaeConfig, options: RandomVaeOptions = {}): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'model_index.json'), JSON.stringify(PIPELINES[config.family], null, 2) + '\n');
  await writeRandomWanVae(join(dir, 'vae'), config, options);
}
