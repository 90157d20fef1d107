// The Wan2.x VAE on WebGPU against the CPU backend, on generated random-weight checkpoints (Wan2.1-style and
// Wan2.2-style with patchify and residual blocks): chunked causal decode and encode -> decode equal on both devices
// (PSNR far above PyTorch MPS's 29.95 dB against CPU), tiled decode that issues no padding dispatch, leaks nothing and
// keeps peak memory flat as the latent grows, and clear errors for bad input and bad checkpoints.
import { psnr, takeValues } from '../helpers/compare.js';
import { mkdtempSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { Generator } from '../../src/core/random.js';
import type { Tensor } from '../../src/core/tensor.js';
import { tensor } from '../../src/ops/creation.js';
import { gpuCounters, memoryStats, resetPeakMemory, synchronize } from '../../src/runtime/stats.js';
import { parseWanVaeConfig } from '../../src/models/wan-vae/config.js';
import { loadWanVae } from '../../src/models/wan-vae/load.js';
import type { WanVae } from '../../src/models/wan-vae/model.js';
import { WAN_VAE_PRESETS, writeRandomWanVae } from '../../src/models/wan-vae/random-checkpoint.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();

function randomInput(shape: number[], seed: number, device: 'cpu' | 'webgpu', range?: number): Tensor {
  const g = new Generator(seed);
  const data = new Float32Array(shape.reduce((a, b) => a * b, 1)).map(() => (range ? range * (2 * g.uniform() - 1) : g.normal()));
  const flat = tensor(data, { device });
  const t = flat.reshape(shape);
  flat.dispose();
  return t;
}

async function checkpoint(preset: string): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), `tensorgpu-${preset}-`));
  await writeRandomWanVae(dir, WAN_VAE_PRESETS[preset], { dtype: 'float32', seed: 3 });
  return dir;
}

describe.skipIf(!gpu.available)(`Wan VAE on WebGPU vs CPU ${gpu.skipReason}`, () => {
  const models: Record<string, { cpu: WanVae; gpu: WanVae; dir: string }> = {};
  beforeAll(async () => {
    for (const preset of ['wan2.1-tiny', 'wan2.2-tiny']) {
      const dir = await checkpoint(preset);
      models[preset] = { dir, cpu: await loadWanVae(dir, { device: 'cpu' }), gpu: await loadWanVae(dir, { device: 'webgpu' }) };
    }
  }, 120_000);

  it.each([
    ['wan2.1-tiny', [1, 16, 2, 4, 6], [1, 3, 5, 32, 48]],
    ['wan2.2-tiny', [1, 8, 2, 3, 5], [1, 3, 5, 48, 80]],
  ])(
    '%s decodes 2 latent frames the same on both devices, with no padding dispatch',
    async (preset, zShape, outShape) => {
      const m = models[preset];
      const expected = m.cpu.decode(randomInput(zShape, 11, 'cpu'));
      expect(expected.shape).toEqual(outShape);
      const z = randomInput(zShape, 11, 'webgpu');
      const before = gpuCounters();
      const got = m.gpu.decode(z);
      const after = gpuCounters();
      z.dispose();
      expect(got.shape).toEqual(outShape);
      const [a, b] = [await takeValues(expected), await takeValues(got)];
      // Not degenerate: values spread over the range, some clamped at the ends.
      expect(Math.max(...a) - Math.min(...a)).toBeGreaterThan(0.5);
      expect(psnr(a, b)).toBeGreaterThan(100);
      expect((after.byKernel.pad ?? 0) - (before.byKernel.pad ?? 0)).toBe(0);
      expect((after.byKernel.conv ?? 0) - (before.byKernel.conv ?? 0)).toBeGreaterThan(10);
    },
    120_000,
  );

  it.each([
    ['wan2.1-tiny', [1, 3, 5, 32, 32], [1, 16, 2, 4, 4]],
    ['wan2.2-tiny', [1, 3, 5, 32, 32], [1, 8, 2, 2, 2]],
  ])(
    '%s encode -> decode round trip matches the CPU backend',
    async (preset, xShape, zShape) => {
      const m = models[preset];
      const zc = m.cpu.encode(randomInput(xShape, 12, 'cpu', 1));
      const x = randomInput(xShape, 12, 'webgpu', 1);
      const zg = m.gpu.encode(x);
      x.dispose();
      expect(zg.shape).toEqual(zShape);
      const [lc, lg] = [await zc.toArray(), await zg.toArray()];
      let worst = 0;
      for (let i = 0; i < lc.length; i++) worst = Math.max(worst, Math.abs(lc[i] - lg[i]) / (Math.abs(lc[i]) + 1e-2));
      expect(worst).toBeLessThan(1e-3);
      const [rc, rg] = [await takeValues(m.cpu.decode(zc)), await takeValues(m.gpu.decode(zg))];
      zc.dispose();
      zg.dispose();
      const db = psnr(rc, rg);
      console.log(`${preset} encode -> decode, WebGPU vs CPU: PSNR ${db.toFixed(1)} dB`);
      expect(db).toBeGreaterThan(90);
    },
    120_000,
  );

  it('tiled decode: same on both devices, close to untiled, no pad dispatch, no leak, flat peak memory', async () => {
    const m = models['wan2.1-tiny'];
    const tiling = { tileSampleMinHeight: 32, tileSampleMinWidth: 32, tileSampleStrideHeight: 24, tileSampleStrideWidth: 24 };
    const shape = [1, 16, 1, 8, 8];
    const tiledCpu = await takeValues(m.cpu.decode(randomInput(shape, 13, 'cpu'), { tiling }));
    const untiled = await takeValues(m.cpu.decode(randomInput(shape, 13, 'cpu')));
    await synchronize();
    const live = memoryStats().liveBytes;
    const z = randomInput(shape, 13, 'webgpu');
    const before = gpuCounters();
    const tiled = await takeValues(m.gpu.decode(z, { tiling }));
    const after = gpuCounters();
    z.dispose();
    expect(psnr(tiledCpu, tiled)).toBeGreaterThan(100);
    expect((after.byKernel.pad ?? 0) - (before.byKernel.pad ?? 0)).toBe(0);
    expect(memoryStats().liveBytes).toBe(live);
    // Tiles see less context (the mid-block attention is global within a tile), so tiled is close, not equal.
    expect(psnr(untiled, tiled)).toBeGreaterThan(15);
    expect(psnr(untiled, tiled)).toBeLessThan(100);

    // Peak memory minus the output stays flat as the latent doubles in width: one tile's working set.
    const extra: number[] = [];
    for (const w of [8, 16]) {
      const zw = randomInput([1, 16, 1, 8, w], 14, 'webgpu');
      await synchronize();
      resetPeakMemory();
      const base = memoryStats().liveBytes;
      const out = m.gpu.decode(zw, { tiling });
      await synchronize();
      extra.push(memoryStats().peakLiveBytes - base - out.numel * 4);
      out.dispose();
      zw.dispose();
    }
    expect(extra[1]).toBeLessThan(extra[0] * 1.15);
  }, 180_000);

  it('tiled encode (patch size 2, tiles both ways) and tiled decode match the CPU backend and leak nothing', async () => {
    const m = models['wan2.2-tiny'];
    // diffusers' tiled_encode counts these in patchified pixels: 64 x 64 -> 32 x 32, tiles of 32 every 16 (2 x 2).
    const tiling = { tileSampleMinHeight: 32, tileSampleMinWidth: 32, tileSampleStrideHeight: 16, tileSampleStrideWidth: 16 };
    const xShape = [1, 3, 5, 64, 64];
    const zc = m.cpu.encode(randomInput(xShape, 16, 'cpu', 1), { tiling });
    await synchronize();
    const live = memoryStats().liveBytes;
    const x = randomInput(xShape, 16, 'webgpu', 1);
    const zg = m.gpu.encode(x, { tiling });
    x.dispose();
    expect(zg.shape).toEqual([1, 8, 2, 4, 4]);
    const [lc, lg] = [await zc.toArray(), await zg.toArray()];
    let worst = 0;
    for (let i = 0; i < lc.length; i++) worst = Math.max(worst, Math.abs(lc[i] - lg[i]) / (Math.abs(lc[i]) + 1e-2));
    expect(worst).toBeLessThan(1e-3);
    // Wan2.2 decode tiles in image pixels: 48 / 32 px = 3-latent tiles every 2 latents.
    const decTiling = { tileSampleMinHeight: 48, tileSampleMinWidth: 48, tileSampleStrideHeight: 32, tileSampleStrideWidth: 32 };
    const [rc, rg] = [await takeValues(m.cpu.decode(zc, { tiling: decTiling })), await takeValues(m.gpu.decode(zg, { tiling: decTiling }))];
    zc.dispose();
    zg.dispose();
    const db = psnr(rc, rg);
    console.log(`wan2.2-tiny tiled encode, WebGPU vs CPU: max rel ${worst.toExponential(2)}; tiled decode of it: PSNR ${db.toFixed(1)} dB`);
    expect(db).toBeGreaterThan(90);
    expect(memoryStats().liveBytes).toBe(live);
  }, 120_000);

  it('a tile larger than the latent decodes untiled', async () => {
    const m = models['wan2.1-tiny'];
    const a = await takeValues(m.gpu.decode(randomInput([1, 16, 1, 3, 4], 15, 'webgpu')));
    const b = await takeValues(m.gpu.decode(randomInput([1, 16, 1, 3, 4], 15, 'webgpu'), { tiling: true }));
    expect(psnr(a, b)).toBe(Infinity);
  }, 60_000);

  it('rejects bad latents, videos and tiling options', () => {
    const m = models['wan2.1-tiny'];
    const z = randomInput([1, 4, 1, 2, 2], 1, 'cpu');
    expect(() => m.cpu.decode(z)).toThrow(/latents must be \[B, 16, T, h, w\], got \[1, 4, 1, 2, 2\]/);
    const x = randomInput([1, 3, 4, 16, 16], 1, 'cpu');
    expect(() => m.cpu.encode(x)).toThrow(/frame count 4 must be 1 \+ 4k/);
    const y = randomInput([1, 3, 1, 12, 16], 1, 'cpu');
    expect(() => m.cpu.encode(y)).toThrow(/height 12 and width 16 must be positive multiples of 8/);
    const z2 = randomInput([1, 16, 1, 8, 8], 1, 'cpu');
    expect(() => m.cpu.decode(z2, { tiling: { tileSampleMinWidth: 30, tileSampleStrideWidth: 24 } })).toThrow(
      /tileSampleMinWidth 30 and tileSampleStrideWidth 24 must be positive multiples of 8/,
    );
  });

  it('a checkpoint with a wrong shape or a missing tensor fails at load, naming the tensor', async () => {
    const src = models['wan2.1-tiny'].dir;
    const dir = mkdtempSync(join(tmpdir(), 'tensorgpu-vae-bad-'));
    const config = JSON.parse(readFileSync(join(src, 'config.json'), 'utf8'));
    await writeRandomWanVae(dir, parseWanVaeConfig({ ...config, base_dim: 4 }), { dtype: 'float32' });
    writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
    await expect(loadWanVae(dir, { device: 'cpu' })).rejects.toThrow(
      /tensor 'encoder.conv_in.weight'.*shape \[4, 3, 3, 3, 3\] does not match the config, which needs \[8, 3, 3, 3, 3\]/,
    );
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...config, num_res_blocks: 2, base_dim: 4 }));
    await expect(loadWanVae(dir, { device: 'cpu', parts: 'decoder' })).rejects.toThrow(/tensor 'decoder.mid_block.resnets.0.norm1.gamma'|missing tensor/);
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...config, dim_mult: [1, 2] }));
    await expect(loadWanVae(dir, { device: 'cpu' })).rejects.toThrow(/'temperal_downsample' needs 1 entries/);
  });
});
