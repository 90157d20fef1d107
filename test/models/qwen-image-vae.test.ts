// Qwen-Image VAE folders (diffusers' AutoencoderKLQwenImage) and pipeline folders, on the CPU backend: the
// generator writes the Hub's layout, loadWanVae opens it from the vae/ folder or the pipeline root, and the same
// weights decode and encode exactly as they do labelled AutoencoderKLWan (the two classes are one module tree).
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { Generator } from '../../src/core/random.js';
import type { Tensor } from '../../src/core/tensor.js';
import { SafetensorsFile } from '../../src/formats/safetensors-reader.js';
import { tensor } from '../../src/ops/creation.js';
import { loadWanVae } from '../../src/models/wan-vae/load.js';
import { WAN_VAE_PRESETS, writeRandomVaePipeline, writeRandomWanVae } from '../../src/models/wan-vae/random-checkpoint.js';

function randomInput(shape: number[], seed: number, range?: number): Tensor {
  const g = new Generator(seed);
  const data = new Float32Array(shape.reduce((a, b) => a * b, 1)).map(() => (range ? range * (2 * g.uniform() - 1) : g.normal()));
  const flat = tensor(data, { device: 'cpu' });
  const t = flat.reshape(shape);
  flat.dispose();
  return t;
}

async function values(t: Tensor): Promise<Float32Array> {
  const v = (await t.toArray()) as Float32Array;
  t.dispose();
  return v;
}

const tensorNames = async (dir: string) => {
  await using f = await SafetensorsFile.open(join(dir, 'diffusion_pytorch_model.safetensors'));
  return [...f.names].sort();
};

describe('Qwen-Image VAE (AutoencoderKLQwenImage) folders', () => {
  let root = '';
  let wanDir = '';
  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'tensorgpu-qwen-image-'));
    await writeRandomVaePipeline(root, WAN_VAE_PRESETS['qwen-image-tiny'], { dtype: 'float32', seed: 5 });
    wanDir = mkdtempSync(join(tmpdir(), 'tensorgpu-qwen-as-wan-'));
    await writeRandomWanVae(wanDir, WAN_VAE_PRESETS['wan2.1-tiny'], { dtype: 'float32', seed: 5 });
  });

  it("writes the Hub's layout: model_index.json, vae/config.json with the Qwen-Image class and keys, Wan2.1's tensor names", async () => {
    expect(JSON.parse(readFileSync(join(root, 'model_index.json'), 'utf8'))).toEqual({
      _class_name: 'QwenImagePipeline',
      vae: ['diffusers', 'AutoencoderKLQwenImage'],
    });
    const config = JSON.parse(readFileSync(join(root, 'vae', 'config.json'), 'utf8'));
    expect(config._class_name).toBe('AutoencoderKLQwenImage');
    expect(config.input_channels).toBe(3);
    for (const wanOnly of ['in_channels', 'out_channels', 'patch_size', 'is_residual', 'decoder_base_dim', 'scale_factor_spatial'])
      expect(config).not.toHaveProperty(wanOnly);
    const names = await tensorNames(join(root, 'vae'));
    expect(names).toEqual(await tensorNames(wanDir));
    expect(names).toContain('decoder.up_blocks.1.upsamplers.0.time_conv.weight');
  });

  it('loads from the pipeline root or its vae/ folder, and decodes and encodes exactly as the same weights labelled AutoencoderKLWan', async () => {
    const fromRoot = await loadWanVae(root, { device: 'cpu' });
    const fromVae = await loadWanVae(join(root, 'vae'), { device: 'cpu', parts: 'decoder' });
    const wan = await loadWanVae(wanDir, { device: 'cpu' });
    try {
      expect(fromRoot.config.family).toBe('qwen-image');
      expect(wan.config.family).toBe('wan');
      const zShape = [1, 16, 2, 3, 4];
      const want = await values(wan.decode(randomInput(zShape, 7)));
      // Not a trivially equal pair: values spread over the clamped range.
      expect(Math.max(...want) - Math.min(...want)).toBeGreaterThan(0.5);
      expect(await values(fromRoot.decode(randomInput(zShape, 7)))).toEqual(want);
      expect(await values(fromVae.decode(randomInput(zShape, 7)))).toEqual(want);
      const x = [1, 3, 5, 16, 16];
      const z = fromRoot.encode(randomInput(x, 8, 1));
      expect(z.shape).toEqual([1, 16, 2, 2, 2]);
      expect(await values(z)).toEqual(await values(wan.encode(randomInput(x, 8, 1))));
    } finally {
      fromRoot.dispose();
      fromVae.dispose();
      wan.dispose();
    }
  });

  it("loads a Wan2.2 pipeline folder's vae/ from the pipeline root as well", async () => {
    const wan22 = mkdtempSync(join(tmpdir(), 'tensorgpu-wan22-pipeline-'));
    await writeRandomVaePipeline(wan22, WAN_VAE_PRESETS['wan2.2-tiny'], { dtype: 'float32' });
    expect(JSON.parse(readFileSync(join(wan22, 'model_index.json'), 'utf8')).vae).toEqual(['diffusers', 'AutoencoderKLWan']);
    const vae = await loadWanVae(wan22, { device: 'cpu', parts: 'decoder' });
    try {
      expect(vae.config).toMatchObject({ family: 'wan', patchSize: 2, isResidual: true });
      expect(vae.spatialScale).toBe(16);
    } finally {
      vae.dispose();
    }
  });

  it("an input_channels 4 (Qwen-Image-Layered's RGBA) VAE encodes and decodes 4 channels", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-qwen-rgba-'));
    await writeRandomWanVae(dir, { ...WAN_VAE_PRESETS['qwen-image-tiny'], inChannels: 4, outChannels: 4 }, { dtype: 'float32' });
    expect(JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')).input_channels).toBe(4);
    const vae = await loadWanVae(dir, { device: 'cpu' });
    try {
      expect(vae.imageChannels).toBe(4);
      const z = vae.encode(randomInput([1, 4, 1, 16, 16], 9, 1));
      expect(z.shape).toEqual([1, 16, 1, 2, 2]);
      const x = vae.decode(z);
      z.dispose();
      expect(x.shape).toEqual([1, 4, 1, 16, 16]);
      x.dispose();
    } finally {
      vae.dispose();
    }
  });

  it('refuses a pipeline without a vae component and a vae/config.json of another class, naming what it found', async () => {
    const bare = mkdtempSync(join(tmpdir(), 'tensorgpu-pipeline-novae-'));
    writeFileSync(
      join(bare, 'model_index.json'),
      JSON.stringify({ _class_name: 'QwenImagePipeline', transformer: ['diffusers', 'QwenImageTransformer2DModel'] }),
    );
    await expect(loadWanVae(bare, { device: 'cpu' })).rejects.toThrow(/model_index.json: the pipeline has no 'vae' component \(components: transformer\)/);
    const other = mkdtempSync(join(tmpdir(), 'tensorgpu-vae-other-'));
    await writeRandomWanVae(other, WAN_VAE_PRESETS['qwen-image-tiny'], { dtype: 'float32' });
    const config = JSON.parse(readFileSync(join(other, 'config.json'), 'utf8'));
    writeFileSync(join(other, 'config.json'), JSON.stringify({ ...config, _class_name: 'AutoencoderKLQwenImage21' }));
    await expect(loadWanVae(other, { device: 'cpu' })).rejects.toThrow(
      /"AutoencoderKLQwenImage21", which is not a supported VAE \(supported _class_name: AutoencoderKLWan, AutoencoderKLQwenImage\)/,
    );
  });

  it('a Qwen-Image config whose weights are Wan2.2-shaped fails at load, naming the class and the tensor', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-qwen-wrong-'));
    await writeRandomWanVae(dir, WAN_VAE_PRESETS['wan2.2-tiny'], { dtype: 'float32' });
    const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...config, _class_name: 'AutoencoderKLQwenImage' }));
    await expect(loadWanVae(dir, { device: 'cpu' })).rejects.toThrow(/tensor '[a-z_.0-9]+'.*(AutoencoderKLQwenImage config|does not match the config)/);
  });
});
