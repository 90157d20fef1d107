// linear over packed 4-bit weights (formats/int4.ts's layout): the CPU reference against the float64 product of the
// dequantized weight, and the WebGPU decode GEMV (M <= 4) and GEMM (M > 4) against the CPU, for odd N, K a multiple
// of the group size, groups 32/64/128, with and without act-order, with the fused bias / residual / SwiGLU epilogues.
import { describe, expect, it } from 'vitest';
import { linear, randn, setDefaultDevice, tensor, type Tensor } from '../../src/index.js';
import { dequantizeInt4, quantizeInt4 } from '../../src/ops/int4.js';
import { randomCodes } from '../../tools/int4-reference/int4_reference.js';
import { expectClose } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

interface Int4Case {
  data: Tensor;
  scale: Tensor;
  zero: Tensor;
  perm?: Tensor;
  groupSize: number;
}

/** A random packed weight [n, k] in the internal layout; with actOrder, a random permutation of K. */
function randomInt4(n: number, k: number, groupSize: number, seed: number, actOrder: boolean, scaleDtype: 'float16' | 'float32' = 'float16'): Int4Case {
  const c = randomCodes(n, k, groupSize, { seed, symmetric: false, actOrder });
  const words = new Int32Array((n * k) / 8);
  for (let r = 0; r < n; r++) for (let j = 0; j < k; j++) words[(r * k + j) >> 3] |= c.codes[r * k + j] << (4 * (j & 7));
  const groups = k / groupSize;
  const perm = actOrder ? Int32Array.from({ length: k }, (_, i) => i).sort(() => 0) : undefined;
  if (perm) {
    // A random permutation (Fisher-Yates on the seeded codes' first values).
    for (let i = k - 1; i > 0; i--) {
      const j = c.codes[i % c.codes.length] % (i + 1);
      [perm[i], perm[j]] = [perm[j], perm[i]];
    }
  }
  return {
    data: tensor(words, { shape: [n, k / 8] }),
    scale: tensor(Float32Array.from(c.scales), { shape: [n, groups] }).to(scaleDtype),
    zero: tensor(c.zeros, { shape: [n, groups] }),
    perm: perm && tensor(perm, { shape: [k] }),
    groupSize,
  };
}

async function onGpu(w: Int4Case): Promise<Int4Case> {
  return {
    data: await w.data.to('webgpu'),
    scale: await w.scale.to('webgpu'),
    zero: await w.zero.to('webgpu'),
    perm: w.perm && (await w.perm.to('webgpu')),
    groupSize: w.groupSize,
  };
}

const opts = (w: Int4Case) => ({ weightScale: w.scale, int4: { zero: w.zero, groupSize: w.groupSize, perm: w.perm } });

describe(`linear with int4 weights ${gpu.skipReason}`, () => {
  for (const [n, k, g, actOrder] of [
    [13, 64, 32, false],
    [33, 128, 64, true],
    [7, 256, 128, false],
    [40, 256, 128, true],
  ] as const) {
    it(`N=${n} K=${k} g=${g}${actOrder ? ' act-order' : ''}: CPU = float64 product of the dequantized weight; GEMV and GEMM on WebGPU = CPU`, async () => {
      const w = randomInt4(n, k, g, n * 7 + k, actOrder);
      const dense = dequantizeInt4(w);
      const bias = randn([n]);
      for (const m of [1, 3, 9]) {
        const x = randn([m, k]);
        const residual = randn([m, n]);
        const want = linear(x, dense, bias, { residual });
        const cpu = linear(x, w.data, bias, { ...opts(w), residual });
        expectClose(await cpu.toArray(), await want.toArray(), { atol: 1e-5, rtol: 1e-5 }, `cpu m=${m}`);
        if (gpu.available) {
          const gw = await onGpu(w);
          const gx = await x.to('webgpu');
          const got = linear(gx, gw.data, await bias.to('webgpu'), { ...opts(gw), residual: await residual.to('webgpu') });
          expectClose(await got.toArray(), await cpu.toArray(), { atol: 1e-4, rtol: 1e-4 }, `webgpu m=${m}`);
        }
      }
    });
  }

  it('fused SwiGLU over a stacked gate|up int4 weight (decode GEMV) and float16 activations', async () => {
    const w = randomInt4(2 * 24, 128, 32, 5, true);
    const dense = dequantizeInt4(w);
    for (const m of [1, 6]) {
      const x = randn([m, 128]);
      const want = linear(x, dense, undefined, { activation: 'swiglu' });
      const cpu = linear(x, w.data, undefined, { ...opts(w), activation: 'swiglu' });
      expectClose(await cpu.toArray(), await want.toArray(), { atol: 1e-5, rtol: 1e-5 }, `cpu m=${m}`);
      if (gpu.available) {
        const gw = await onGpu(w);
        const got = linear(await x.to('webgpu'), gw.data, undefined, { ...opts(gw), activation: 'swiglu' });
        expectClose(await got.toArray(), await cpu.toArray(), { atol: 1e-4, rtol: 1e-4 }, `webgpu m=${m}`);
        const half = linear((await x.to('webgpu')).to('float16'), gw.data, undefined, opts(gw));
        const halfCpu = linear(x.to('float16'), w.data, undefined, opts(w));
        expectClose(await half.toArray(), await halfCpu.toArray(), { atol: 2e-2, rtol: 4e-3 }, `webgpu float16 m=${m}`);
      }
    }
  });

  it('the input gradient flows through an int4 weight (QLoRA-style: the weight is frozen)', async () => {
    const w = randomInt4(16, 64, 32, 9, true);
    const x = randn([2, 64], { requiresGrad: true });
    const r = randn([2, 16]);
    linear(x, w.data, undefined, opts(w)).mul(r).sum().backward();
    const xd = x.detach().requiresGrad_();
    linear(xd, dequantizeInt4(w)).mul(r).sum().backward();
    expectClose(await x.grad!.toArray(), await xd.grad!.toArray(), { atol: 1e-5, rtol: 1e-5 }, 'dx');
    expect(w.data.requiresGrad).toBe(false);
  });

  it('quantizeInt4 (quantize at load): each weight within half a step of its group, WebGPU codes = CPU codes but for rounding ties', async () => {
    const x = randn([24, 256]);
    for (const g of [32, 64, 128]) {
      const q = quantizeInt4(x, g);
      const d = await dequantizeInt4(q).toArray();
      const xs = await x.toArray();
      const scale = await q.scale.toArray();
      for (let i = 0; i < xs.length; i++) expect(Math.abs(d[i] - xs[i])).toBeLessThanOrEqual(scale[Math.floor(i / g)] * 0.5 + 1e-6);
      if (gpu.available) {
        const gq = quantizeInt4(await x.to('webgpu'), g);
        expectClose(await gq.scale.toArray(), scale, { atol: 0, rtol: 1e-6 }, `scales g=${g}`);
        const [a, b] = [await gq.data.toArray(), await q.data.toArray()];
        const differ = a.filter((v, i) => v !== b[i]).length;
        expect(differ, `words g=${g}`).toBeLessThanOrEqual(2);
        expect(Array.from(await gq.zero.toArray())).toEqual(Array.from(await q.zero.toArray()));
      }
    }
  });
});
