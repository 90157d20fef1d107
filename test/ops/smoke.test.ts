import { describe, expect, it } from 'vitest';
import { manualSeed, randn } from '../../src/index.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();

describe.skipIf(!gpu.available)(`webgpu smoke ${gpu.skipReason}`, () => {
  it('matmul matches the CPU backend', async () => {
    manualSeed(1);
    const a = randn([7, 5], { device: 'webgpu' });
    const b = randn([5, 3], { device: 'webgpu' });
    const got = await a.matmul(b).toArray();
    const want = await (await a.to('cpu')).matmul(await b.to('cpu')).toArray();
    for (let i = 0; i < want.length; i++) expect(got[i]).toBeCloseTo(want[i], 5);
  });
});
