// 1000 training steps (forward, crossEntropy, backward, clipGradNorm, fused AdamW over a parameter arena) on
// WebGPU: live GPU bytes identical after every step from the second on, the pool's allocation flat once it has
// settled (no growth over the last 900 steps), and everything released at the end.
import { describe, expect, it } from 'vitest';
import {
  AdamW,
  Generator,
  clipGradNorm,
  crossEntropy,
  flatParameters,
  indexSelect,
  linear,
  memoryStats,
  randn,
  rmsNorm,
  synchronize,
  tensor,
  tidy,
} from '../../src/index.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();

describe.skipIf(!gpu.available)(`memory over 1000 training steps ${gpu.skipReason}`, () => {
  it('live and allocated GPU bytes stay flat; all of it returns after dispose', async () => {
    await synchronize();
    const start = memoryStats().liveBytes;
    const g = new Generator(9);
    const init = tidy(() => [
      randn([12, 16], { device: 'webgpu', generator: g }).mul(0.5),
      randn([24, 16], { device: 'webgpu', generator: g }).mul(0.2),
      randn([12, 24], { device: 'webgpu', generator: g }).mul(0.2),
    ]);
    const params = flatParameters(init);
    for (const t of init) t.dispose();
    const [emb, w1, w2] = params;
    const ids = tensor([1, 5, 3, 7, 2, 9, 4, 0], { dtype: 'int32', device: 'webgpu' });
    const targets = tensor([5, 3, 7, 2, 9, 4, 0, 1], { dtype: 'int32', device: 'webgpu' });
    const opt = new AdamW(params, { lr: 1e-2 });
    let live = -1;
    let allocated = -1;
    let loss = NaN;
    for (let step = 0; step < 1000; step++) {
      const l = tidy(() => crossEntropy(linear(linear(rmsNorm(indexSelect(emb, 0, ids), undefined, 1e-6), w1).silu(), w2), targets));
      l.backward();
      clipGradNorm(params, 1).dispose();
      opt.step();
      opt.zeroGrad();
      if (step === 999) loss = await l.item();
      l.dispose();
      if (step % 100 === 1 || step === 999) {
        await synchronize();
        const m = memoryStats();
        if (step === 1) live = m.liveBytes;
        expect(m.liveBytes, `live bytes after step ${step}`).toBe(live);
        // The pool settles in the first steps (its size classes fill), then holds still.
        if (step === 101) allocated = m.allocatedBytes;
        if (step > 101) expect(m.allocatedBytes, `allocated bytes after step ${step}`).toBe(allocated);
      }
    }
    expect(loss).toBeLessThan(0.05);
    opt.dispose();
    for (const t of [...params, ids, targets]) t.dispose();
    await synchronize();
    expect(memoryStats().liveBytes).toBe(start);
  });
});
