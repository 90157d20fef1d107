// End to end: minimize ||A x - b||^2 for x requiring grad with autograd (matmul, sub, pow, sum) and AdamW under a
// cosine schedule with gradient clipping: the loss falls by orders of magnitude in a few hundred steps, on the
// CPU backend and on WebGPU, and each step adds exactly one AdamW dispatch on WebGPU.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { AdamW, clipGradNorm, cosineWithWarmup, gpuCounters, LrScheduler, type DeviceName } from '../../src/index.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
const devices: DeviceName[] = gpu.available ? ['cpu', 'webgpu'] : ['cpu'];

async function leastSquares(device: DeviceName): Promise<{ losses: number[]; adamDispatches: number[] }> {
  const gen = new tg.Generator(5);
  const A = tg.randn([48, 8], { generator: gen, device });
  const xStar = tg.randn([8, 1], { generator: gen, device });
  const b = tg.noGrad(() => A.matmul(xStar));
  const x = tg.zeros([8, 1], { device }).requiresGrad_();
  const steps = 300;
  const opt = new AdamW([x], { lr: 0.1, weightDecay: 0 });
  const sched = new LrScheduler(opt, cosineWithWarmup(10, steps));
  const losses: number[] = [];
  const adamDispatches: number[] = [];
  for (let step = 0; step < steps; step++) {
    const loss = tg.tidy(() => A.matmul(x).sub(b).pow(2).sum());
    loss.backward();
    clipGradNorm([x], 1000).dispose();
    const before = gpuCounters().byKernel.adam ?? 0;
    opt.step();
    adamDispatches.push((gpuCounters().byKernel.adam ?? 0) - before);
    sched.step();
    opt.zeroGrad();
    if (step % 50 === 0 || step === steps - 1) losses.push(await loss.item());
    loss.dispose();
  }
  opt.dispose();
  for (const t of [A, xStar, b, x]) t.dispose();
  return { losses, adamDispatches };
}

describe('least squares with AdamW', () => {
  for (const device of devices) {
    it(`${device}: the loss falls by orders of magnitude in 300 steps`, async () => {
      const { losses, adamDispatches } = await leastSquares(device);
      const [first, last] = [losses[0], losses[losses.length - 1]];
      expect(first).toBeGreaterThan(100);
      expect(last, `losses every 50 steps: ${losses.map((l) => l.toExponential(2)).join(', ')}`).toBeLessThan(first * 1e-4);
      if (device === 'webgpu') expect(adamDispatches.every((d) => d === 1)).toBe(true);
    });
  }
});
