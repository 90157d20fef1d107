// bfloat16 parameters with float32 master weights: AdamW steps too small for 16 bits accumulate in the master
// copy, and the parameter is exactly the master's rounding (the float32 run's, rounded), on CPU and WebGPU;
// without master weights the same steps round away. The master copy is saved and loaded with the state.
import { describe, expect, it } from 'vitest';
import { AdamW, Generator, randn, tidy, type Tensor } from '../../src/index.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
const devices = ['cpu', ...(gpu.available ? ['webgpu' as const] : [])] as const;

/** loss = sum(p * c): the gradient is c, the same for every run, whatever p is. */
function step(p: Tensor, c: Tensor, opt: AdamW): void {
  const loss = tidy(() => p.mul(c.to(p.dtype)).sum());
  loss.backward();
  loss.dispose();
  opt.step();
  opt.zeroGrad();
}

describe('master weights', () => {
  for (const device of devices) {
    it(`${device}: bf16 parameters follow the float32 run's rounding; plain bf16 steps round away`, async () => {
      const g = new Generator(6);
      const init = randn([37, 5], { device, generator: g }).add(4).to('bfloat16'); // |p| ~ 4: bf16 spacing 2^-5
      const c = randn([37, 5], { device, generator: g });
      const ref = init.to('float32').requiresGrad_();
      const mixed = init.clone().requiresGrad_();
      const plain = init.clone().requiresGrad_();
      const o = { lr: 5e-4, weightDecay: 0 };
      const [oRef, oMixed, oPlain] = [new AdamW([ref], o), new AdamW([mixed], { ...o, masterWeights: true }), new AdamW([plain], o)];
      for (let i = 0; i < 40; i++) {
        step(ref, c, oRef);
        step(mixed, c, oMixed);
        step(plain, c, oPlain);
      }
      const want = Array.from(await ref.to('bfloat16').toArray());
      expect(Array.from(await mixed.toArray())).toEqual(want);
      // 40 steps of 5e-4 move the float32 run by ~0.02, past half a bf16 step (2^-6 at 4); one step of 5e-4 rounds away.
      expect(Array.from(await plain.toArray())).toEqual(Array.from(await init.toArray()));
      const start = Array.from(await init.toArray());
      expect(want.filter((v, i) => v !== start[i]).length).toBeGreaterThan(want.length / 2);
      const sd = oMixed.stateDict();
      expect(sd.state[0]!.tensors.master_weight.dtype).toBe('float32');
      const fresh = new AdamW([mixed], { ...o, masterWeights: true });
      fresh.loadStateDict(sd);
      step(ref, c, oRef);
      step(mixed, c, fresh);
      expect(Array.from(await mixed.toArray())).toEqual(Array.from(await ref.to('bfloat16').toArray()));
      for (const opt of [oRef, oMixed, oPlain, fresh]) opt.dispose();
    });
  }
});
