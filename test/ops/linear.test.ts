import { describe, expect, it } from 'vitest';
import { DTypeError, gpuCounters, linear, randn, setDefaultDevice, ShapeError, synchronize, tensor, type Tensor } from '../../src/index.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

/** y[r, j] = sum_k x[r, k] * w[j, k] + bias[j], in float64 from the values as stored. */
async function byDefinition(x: Tensor, w: Tensor, bias?: Tensor): Promise<Float64Array> {
  const [xv, wv] = [await x.contiguous().toArray(), await w.contiguous().toArray()];
  const bv = bias ? await bias.contiguous().toArray() : undefined;
  const [n, k] = w.shape;
  const m = xv.length / k;
  const out = new Float64Array(m * n);
  for (let r = 0; r < m; r++) {
    for (let j = 0; j < n; j++) {
      let s = bv ? bv[j] : 0;
      for (let p = 0; p < k; p++) s += xv[r * k + p] * wv[j * k + p];
      out[r * n + j] = s;
    }
  }
  return out;
}

const devices = ['cpu', ...(gpu.available ? ['webgpu' as const] : [])] as const;
const tolerance = { float32: 2e-5, float16: 2e-3, bfloat16: 1.6e-2 } as const;

describe(`linear ${gpu.skipReason}`, () => {
  for (const device of devices) {
    for (const [xDtype, wDtype] of [
      ['float32', 'bfloat16'],
      ['float32', 'float16'],
      ['bfloat16', 'bfloat16'],
      ['float32', 'float32'],
    ] as const) {
      it(`${xDtype} x with a ${wDtype} weight on ${device}: decode rows (GEMV) and batches (GEMM), bias, leading dims`, async () => {
        for (const [lead, k, n] of [
          [[1], 256, 33],
          [[3], 64, 130],
          [[2, 5], 48, 7],
          [[1, 1, 4], 1024, 12],
        ] as const) {
          const x = randn([...lead, k], { device: 'cpu' }).to(xDtype);
          const w = randn([n, k], { device: 'cpu' }).mul(0.1).to(wDtype);
          const bias = randn([n], { device: 'cpu' }).to(wDtype);
          const [dx, dw, db] = [await x.to(device), await w.to(device), await bias.to(device)];
          const y = linear(dx, dw, db);
          expect(y.shape).toEqual([...lead, n]);
          expect(y.dtype).toBe(xDtype);
          const got = await y.toArray();
          const want = await byDefinition(x, w, bias);
          const tol = tolerance[xDtype] * Math.sqrt(k);
          for (let i = 0; i < want.length; i++)
            expect(Math.abs(got[i] - want[i]), `[${lead}] ${k}x${n} [${i}]`).toBeLessThanOrEqual(tol * (1 + Math.abs(want[i])));
        }
      });
    }
  }

  it.skipIf(!gpu.available)('a decode step with a mixed-dtype weight is one dispatch (no cast pass)', async () => {
    const x = randn([1, 512], { device: 'webgpu' });
    const w = randn([256, 512], { device: 'webgpu' }).to('bfloat16');
    const b = randn([256], { device: 'webgpu' });
    await synchronize();
    const before = gpuCounters().dispatches;
    const y = linear(x, w, b);
    expect(gpuCounters().dispatches - before).toBe(1);
    y.dispose();
  });

  it('bad shapes and dtypes are typed errors naming them', () => {
    const x = randn([2, 8]);
    expect(() => linear(x, randn([4, 7]))).toThrow(/does not end in K = 7/);
    expect(() => linear(x, randn([8]))).toThrow(ShapeError);
    expect(() => linear(x, randn([4, 8]), randn([5]))).toThrow(/bias must have shape \[4\]/);
    expect(() => linear(x, tensor([[1, 2, 3, 4, 5, 6, 7, 8]], { dtype: 'int32' }))).toThrow(DTypeError);
  });
});
