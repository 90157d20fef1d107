// Opens a diffusers AutoencoderKLWan or AutoencoderKLQwenImage directory (config.json +
// diffusion_pytorch_model.safetensors), or a pipeline folder holding one in `vae/`: typed config, every expected
// tensor checked for presence and shape before anything is uploaded, weights streamed to the device.
import { resolveModelPath, type HubOptions } from '../../hub/download.js';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { getDefaultDevice } from '../../runtime/registry.js';
import type { DeviceName } from '../../runtime/backend.js';
import type { DType } from '../../core/dtype.js';
import { CheckpointError } from '../../core/errors.js';
import type { Tensor } from '../../core/tensor.js';
import { Checkpoint } from '../../formats/checkpoint.js';
import { wanVaeSpec, wanVaeWeightSpecs, type Channels } from './architecture.js';
import { parseWanVaeConfig, VAE_CLASSES, type WanVaeConfig } from './config.js';
import { WanVae } from './model.js';

export type VaePart = 'decoder' | 'encoder' | 'both';

export interface LoadWanVaeOptions {
  device?: DeviceName;
  /** Converts the weights (e.g. 'float32'); by default they stay in the file's dtype (the conv kernel reads bf16). */
  dtype?: DType;
  /** Load only what decoding (or encoding) needs; default both. */
  parts?: VaePart;
  onProgress?: (done: number, total: number) => void;
  /** How a Hugging Face repo id (org/name/vae for a pipeline's VAE) is fetched. */
  hub?: HubOptions;
}

const isEncoderWeight = (name: string) => name.startsWith('encoder.') || name.startsWith('quant_conv.');

/** True when part needs the named tensor. */
export function partNeeds(part: VaePart, name: string): boolean {
  return part === 'both' || (part === 'encoder') === isEncoderWeight(name);
}

/**
 * Channel counts from the weights themselves: with patch_size 2, diffusers versions disagree on whether
 * in_channels counts the folded 2x2 channels (12) or the image's (3); conv_in / conv_out say which.
 */
function channelsOf(ck: Checkpoint, config: WanVaeConfig): Channels {
  const p2 = config.patchSize ** 2;
  const pick = (name: string, axis: number, nominal: number) => {
    if (!ck.has(name)) return nominal;
    const n = ck.entry(name).shape[axis];
    return n === nominal || n === nominal * p2 ? n : nominal;
  };
  return { encoderIn: pick('encoder.conv_in.weight', 1, config.inChannels), decoderOut: pick('decoder.conv_out.weight', 0, config.outChannels) };
}

/**
 * A diffusers pipeline folder (model_index.json and no config.json of its own) -> its `vae/` component, as
 * `from_pretrained(dir, subfolder="vae")` reads it; any other path as given.
 */
export function vaeFolder(dir: string): string {
  const index = join(dir, 'model_index.json');
  if (existsSync(join(dir, 'config.json')) || !existsSync(index)) return dir;
  let components: Record<string, unknown>;
  try {
    components = JSON.parse(readFileSync(index, 'utf8')) as Record<string, unknown>;
  } catch (e) {
    throw new CheckpointError(`not valid JSON (${(e as Error).message})`, { file: index });
  }
  if (components === null || typeof components !== 'object' || !Array.isArray(components.vae)) {
    const listed = components && typeof components === 'object' ? Object.keys(components).filter((k) => !k.startsWith('_')) : [];
    throw new CheckpointError(`the pipeline has no 'vae' component (components: ${listed.join(', ') || 'none'})`, { file: index });
  }
  return join(dir, 'vae');
}

const classOf = (config: WanVaeConfig) => Object.entries(VAE_CLASSES).find(([, f]) => f === config.family)?.[0];

export async function loadWanVae(path: string, options: LoadWanVaeOptions = {}): Promise<WanVae> {
  const dir = vaeFolder(await resolveModelPath(path, options.hub));
  await using ck = await Checkpoint.open(dir);
  if (ck.config === undefined) throw new CheckpointError('no config.json', { file: dir });
  const config = parseWanVaeConfig(ck.config, join(dir, 'config.json'));
  const spec = wanVaeSpec(config, channelsOf(ck, config));
  const part = options.parts ?? 'both';
  const wanted = wanVaeWeightSpecs(spec).filter((s) => partNeeds(part, s.name));
  for (const s of wanted) {
    if (!ck.has(s.name))
      throw new CheckpointError(`missing tensor for this ${classOf(config)} config (base_dim ${config.baseDim}, dim_mult ${JSON.stringify(config.dimMult)})`, {
        file: dir,
        tensor: s.name,
      });
    const e = ck.entry(s.name);
    if (e.shape.join() !== s.shape.join()) {
      throw new CheckpointError(`shape [${e.shape.join(', ')}] does not match the config, which needs [${s.shape.join(', ')}]`, {
        file: e.file,
        tensor: s.name,
        offset: e.begin,
      });
    }
  }
  const total = wanted.reduce((sum, s) => sum + (ck.entry(s.name).end - ck.entry(s.name).begin), 0);
  let done = 0;
  const weights = new Map<string, Tensor>();
  try {
    for (const s of wanted) {
      weights.set(
        s.name,
        await ck.load(s.name, { device: options.device ?? getDefaultDevice(), dtype: options.dtype, onBytes: (n) => options.onProgress?.((done += n), total) }),
      );
    }
  } catch (e) {
    for (const t of weights.values()) t.dispose();
    throw e;
  }
  return new WanVae(config, spec, weights);
}
