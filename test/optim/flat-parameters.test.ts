// Multi-tensor apply: parameters in one arena (flatParameters) step as one span, one dispatch for any number of
// tensors, with exactly the values the per-tensor path gives; gradients accumulate in their arena slots; a step
// where a parameter has no gradient, and a loaded state dict, take the per-tensor path and stay exact.
import { describe, expect, it } from 'vitest';
import {
  AdamW,
  Generator,
  SGD,
  clipGradNorm,
  copyInto,
  flatParameters,
  gpuCounters,
  memoryStats,
  randn,
  synchronize,
  tidy,
  type Tensor,
} from '../../src/index.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { expectClose } from '../helpers/compare.js';

const gpu = await setupWebGpu();
const devices = ['cpu', ...(gpu.available ? ['webgpu' as const] : [])] as const;
const SHAPES = [[3, 5], [7], [2, 3, 4], [1], [33, 9]];

function values(device: 'cpu' | 'webgpu'): Tensor[] {
  const g = new Generator(4);
  return SHAPES.map((s) => randn(s, { device, generator: g }));
}

/** sum_i (p_i * c_i + p_i^2 / 2): a gradient c_i + p_i that differs per element and per step. */
function backward(params: readonly Tensor[], skip = -1): void {
  const loss = tidy(() =>
    params
      .map((p, i) =>
        i === skip
          ? undefined
          : p
              .mul(p)
              .mul(0.5)
              .add(p.mul(0.3 * (i + 1)))
              .sum(),
      )
      .filter((t): t is Tensor => t !== undefined)
      .reduce((a, b) => a.add(b)),
  );
  loss.backward();
  loss.dispose();
}

const arrays = (ts: readonly Tensor[]) => Promise.all(ts.map(async (t) => Array.from(await t.toArray())));

describe('flat parameters: one optimizer dispatch for many tensors', () => {
  for (const device of devices) {
    it(`${device}: AdamW over the arena equals AdamW per tensor, bit for bit, over 12 steps`, async () => {
      const init = values(device);
      const flat = flatParameters(init);
      const apart = init.map((v) => v.clone().requiresGrad_());
      const [fo, ao] = [new AdamW(flat, { lr: 0.05, weightDecay: 0.1 }), new AdamW(apart, { lr: 0.05, weightDecay: 0.1 })];
      expect(fo.fused).toBe(true);
      expect(ao.fused).toBe(false);
      for (let step = 0; step < 12; step++) {
        for (const [params, opt] of [
          [flat, fo],
          [apart, ao],
        ] as const) {
          backward(params);
          await synchronize();
          const d0 = gpuCounters().dispatches;
          opt.step();
          if (device === 'webgpu' && step === 1) expect(gpuCounters().dispatches - d0).toBe(opt === fo ? 1 : SHAPES.length);
          opt.zeroGrad();
        }
      }
      expect(await arrays(flat)).toEqual(await arrays(apart));
      const sd = fo.stateDict();
      expect(sd.state.map((s) => s!.tensors.exp_avg.shape)).toEqual(SHAPES);
      expect(sd.state.every((s) => s!.step === 12)).toBe(true);
      const want = await arrays(ao.stateDict().state.map((s) => s!.tensors.exp_avg_sq));
      expect(await arrays(sd.state.map((s) => s!.tensors.exp_avg_sq))).toEqual(want);
      for (const t of [...flat, ...apart, ...init]) t.dispose();
      fo.dispose();
      ao.dispose();
    });
  }

  it.skipIf(!gpu.available)(
    'gradients accumulate in the arena and clip as one span; a missing gradient or a loaded state falls back, exactly; memory returns',
    async () => {
      await synchronize();
      const live = memoryStats().liveBytes;
      const init = values('webgpu');
      const flat = flatParameters(init);
      const apart = init.map((v) => v.clone().requiresGrad_());
      backward(flat);
      backward(flat);
      backward(apart);
      backward(apart);
      expect(await arrays(flat.map((p) => p.grad!))).toEqual(await arrays(apart.map((p) => p.grad!)));
      expect(flat[0].grad!.storage).toBe(flat[4].grad!.storage);
      // Clipping the arena's span in one pass gives the per-tensor clip's norm and gradients.
      const [nf, na] = [clipGradNorm(flat, 0.5), clipGradNorm(apart, 0.5)];
      expect(await nf.item()).toBeCloseTo(await na.item(), 4);
      expectClose((await arrays(flat.map((p) => p.grad!))).flat(), (await arrays(apart.map((p) => p.grad!))).flat(), { atol: 1e-6, rtol: 1e-5 }, 'clipped');
      expect(flat[0].grad!.storage).toBe(flat[4].grad!.storage);
      nf.dispose();
      na.dispose();
      for (const [i, p] of flat.entries()) copyInto(p.grad!, apart[i].grad!);
      const [fo, ao] = [new SGD(flat, { lr: 0.1, momentum: 0.9 }), new SGD(apart, { lr: 0.1, momentum: 0.9 })];
      for (let step = 0; step < 4; step++) {
        for (const [params, opt] of [
          [flat, fo],
          [apart, ao],
        ] as const) {
          if (step > 0) backward(params, step === 2 ? 3 : -1); // step 2: parameter 3 gets no gradient
          opt.step();
          opt.zeroGrad();
        }
      }
      expect(await arrays(flat)).toEqual(await arrays(apart));
      fo.loadStateDict(fo.stateDict());
      ao.loadStateDict(ao.stateDict());
      for (const [params, opt] of [
        [flat, fo],
        [apart, ao],
      ] as const) {
        backward(params);
        opt.step();
        opt.zeroGrad();
      }
      expect(await arrays(flat)).toEqual(await arrays(apart));
      for (const t of [...flat, ...apart, ...init]) t.dispose();
      fo.dispose();
      ao.dispose();
      await synchronize();
      expect(memoryStats().liveBytes).toBe(live);
    },
  );
});
