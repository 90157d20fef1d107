// The seed's check of issue 14: an image-sized encode -> decode round trip on WebGPU against the CPU backend,
// reported as PSNR (PyTorch MPS reached 29.95 dB against its CPU after its fix), for a Wan2.2-shaped VAE (patchify,
// residual blocks) and a Qwen-Image VAE loaded from its own AutoencoderKLQwenImage folder.
import { psnr, takeValues } from '../helpers/compare.js';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Tensor } from '../../src/core/tensor.js';
import { tensor } from '../../src/ops/creation.js';
import { loadWanVae } from '../../src/models/wan-vae/load.js';
import { WAN_VAE_PRESETS, writeRandomWanVae } from '../../src/models/wan-vae/random-checkpoint.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();

/**
 * Height and width of the test image. 128 keeps each case to a few seconds on a 2-core machine with SwiftShader
 * (the CPU backend's decode dominates; 256 takes 11-20 s there); TENSORGPU_VAE_IMAGE_SIZE=256 (or 512, a multiple of
 * 16) runs the same check larger.
 */
const SIZE = Number(process.env.TENSORGPU_VAE_IMAGE_SIZE ?? 128);

/**
 * A deterministic photo-like RGB frame [1, 3, 1, S, S] in [-1, 1]: smooth gradients (most of a photo), hard-edged
 * discs (edges, where a wrong tap or border shows), and fine stripes (high frequencies).
 */
function testImage(device: 'cpu' | 'webgpu'): Tensor {
  const data = new Float32Array(3 * SIZE * SIZE);
  const discs = [
    [0.3, 0.35, 0.18],
    [0.7, 0.6, 0.22],
    [0.45, 0.8, 0.1],
  ];
  for (let y = 0; y < SIZE; y++) {
    for (let x = 0; x < SIZE; x++) {
      const u = x / SIZE;
      const v = y / SIZE;
      const inside = discs.findIndex(([cx, cy, r]) => (u - cx) ** 2 + (v - cy) ** 2 < r * r);
      const stripes = 0.15 * Math.sin((2 * Math.PI * (x + 2 * y)) / 6);
      const base = [0.8 * u - 0.4, 0.6 * Math.sin(3 * v + u), 0.5 - 0.9 * u * v];
      for (let c = 0; c < 3; c++) {
        const value = inside >= 0 ? [0.9, -0.7, 0.2][(inside + c) % 3] : base[c] + (u > 0.5 && v < 0.4 ? stripes : 0);
        data[(c * SIZE + y) * SIZE + x] = Math.max(-1, Math.min(1, value));
      }
    }
  }
  const flat = tensor(data, { device });
  const t = flat.reshape([1, 3, 1, SIZE, SIZE]);
  flat.dispose();
  return t;
}

/**
 * float32 on both devices differs only in summation order: measured 130-137 dB at 128 and 256. A wrong tap, border,
 * stride or workgroup-count bug moves whole regions and lands below 40 dB (MPS's bug: 29.95 dB), and running the
 * GPU side on the same weights rounded to bfloat16 gives 50-57 dB; 90 dB fails all of these with 40 dB to spare.
 */
const MIN_PSNR_DB = 90;

describe.skipIf(!gpu.available)(`VAE encode -> decode of a ${SIZE}x${SIZE} image, WebGPU vs CPU ${gpu.skipReason}`, () => {
  it.each(['wan2.2-tiny', 'qwen-image-tiny'])(
    '%s',
    async (preset) => {
      const dir = mkdtempSync(join(tmpdir(), `tensorgpu-roundtrip-${preset}-`));
      await writeRandomWanVae(dir, WAN_VAE_PRESETS[preset], { dtype: 'float32', seed: 17 });
      const cpu = await loadWanVae(dir, { device: 'cpu' });
      const webgpu = await loadWanVae(dir, { device: 'webgpu' });
      try {
        expect(webgpu.config.family).toBe(WAN_VAE_PRESETS[preset].family);
        const s = cpu.spatialScale;
        const zc = cpu.encode(testImage('cpu'));
        const x = testImage('webgpu');
        const zg = webgpu.encode(x);
        x.dispose();
        expect(zg.shape).toEqual([1, cpu.config.zDim, 1, SIZE / s, SIZE / s]);
        const [lc, lg] = [(await zc.toArray()) as Float32Array, (await zg.toArray()) as Float32Array];
        let worst = 0;
        for (let i = 0; i < lc.length; i++) worst = Math.max(worst, Math.abs(lc[i] - lg[i]) / (Math.abs(lc[i]) + 1e-2));
        const [rc, rg] = [await takeValues(cpu.decode(zc)), await takeValues(webgpu.decode(zg))];
        zc.dispose();
        zg.dispose();
        expect(rc.length).toBe(3 * SIZE * SIZE);
        // Not degenerate: the reconstruction spreads over the range rather than sitting clamped at one end.
        const spread = rc.reduce((m, v) => Math.max(m, v), -Infinity) - rc.reduce((m, v) => Math.min(m, v), Infinity);
        expect(spread).toBeGreaterThan(0.5);
        const db = psnr(rc, rg);
        console.log(
          `${preset} encode -> decode of a 3x${SIZE}x${SIZE} image, WebGPU vs CPU: PSNR ${db.toFixed(1)} dB (MPS after its fix: 29.95 dB); latents max rel error ${worst.toExponential(2)}`,
        );
        expect(worst).toBeLessThan(1e-3);
        expect(db).toBeGreaterThan(MIN_PSNR_DB);
      } finally {
        cpu.dispose();
        webgpu.dispose();
      }
    },
    300_000,
  ); // a hang guard: each case takes seconds
});
