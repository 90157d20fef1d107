// clipGradNorm against the float64 norm (L2, L1, max) of every gradient together: the norm it returns, the
// gradients scaled in place by min(1, maxNorm / (norm + 1e-6)), and on WebGPU nothing read back while it runs
// (2 dispatches per gradient + 1); bf16 gradients and views starting mid-word, strided and aliased gradients
// (each scaled once), a large maxNorm leaving gradients as they are, NaN, no gradients at all.
import { describe, expect, it } from 'vitest';
import { clipGradNorm, gpuCounters, synchronize, tensor, type DeviceName, type DType, type Tensor } from '../../src/index.js';
import { gradNorm } from '../../src/kernels/optim/cpu.js';
import { expectClose, type Tolerance } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { makeProblem, roundTo, type ParamSpec } from './reference.js';

const gpu = await setupWebGpu();

const SPECS: ParamSpec[] = [
  { shape: [3000], dtype: 'float32' },
  { shape: [7, 13], dtype: 'float32', transposedGrad: true },
  { shape: [], dtype: 'float32' },
  { shape: [301], dtype: 'bfloat16' },
  { shape: [0], dtype: 'float32' },
];

/** Parameters with gradients from a fresh problem (its one step's gradients). */
function withGrads(device: DeviceName, seed: number, specs = SPECS): { params: Tensor[]; grads: Float64Array[] } {
  const problem = makeProblem(specs, 1, seed);
  const params = specs.map((s, i) => tensor(problem.init[i], { shape: s.shape, dtype: s.dtype, device }).requiresGrad_());
  params.forEach((p, i) => {
    const s = specs[i];
    const g = problem.grads[0][i]!;
    if (!s.transposedGrad) p.grad = tensor(g, { shape: s.shape, dtype: s.dtype, device });
    else {
      const [r, c] = s.shape;
      const t = new Float64Array(g.length);
      for (let a = 0; a < r; a++) for (let b = 0; b < c; b++) t[b * r + a] = g[a * c + b];
      const base = tensor(t, { shape: [c, r], dtype: s.dtype, device });
      p.grad = base.T;
      base.dispose();
    }
  });
  return { params, grads: problem.grads[0] as Float64Array[] };
}

function release(params: Tensor[]): void {
  for (const p of params) {
    p.zeroGrad();
    p.dispose();
  }
}

const toleranceOf = (dtype: DType): Tolerance => (dtype === 'bfloat16' ? { atol: 1e-6, rtol: 8e-3 } : { atol: 1e-7, rtol: 2e-6 });

async function checkClip(device: DeviceName, normType: number, maxNorm: number, seed: number): Promise<void> {
  const { params, grads } = withGrads(device, seed);
  const norm = gradNorm(grads, normType);
  const coef = Math.min(1, maxNorm / (norm + 1e-6));
  const before = gpuCounters();
  const got = clipGradNorm(params, maxNorm, { normType });
  const after = gpuCounters();
  if (device === 'webgpu') {
    expect(after.reads, 'reads during clipGradNorm').toBe(before.reads);
    // The empty gradient is skipped by both passes; the transposed one is first copied (one dispatch).
    expect(after.dispatches - before.dispatches).toBe(2 * (params.length - 1) + 1 + 1);
  }
  expect(got.shape).toEqual([]);
  expect(got.dtype).toBe('float32');
  expect(await got.item()).toBeCloseTo(norm, 4 - Math.ceil(Math.log10(norm)));
  expect(Math.abs((await got.item()) - norm) / norm).toBeLessThan(1e-5);
  for (const [i, p] of params.entries()) {
    const dtype = SPECS[i].dtype;
    expectClose(
      await p.grad!.toArray(),
      grads[i].map((g) => roundTo(dtype, g * coef)),
      toleranceOf(dtype),
      `grad ${i} (${dtype}), norm type ${normType}`,
    );
  }
  got.dispose();
  release(params);
}

const devices: DeviceName[] = gpu.available ? ['cpu', 'webgpu'] : ['cpu'];

describe('clipGradNorm', () => {
  for (const device of devices) {
    it(`${device}: L2, L1 and max norms against float64, gradients scaled`, async () => {
      await checkClip(device, 2, 1, 1);
      await checkClip(device, 1, 10, 2);
      await checkClip(device, Infinity, 0.5, 3);
    });

    it(`${device}: a maxNorm above the norm leaves the gradients as they are (times 1)`, async () => {
      const { params, grads } = withGrads(device, 4);
      const norm = await clipGradNorm(params, 1e6).item();
      expect(norm).toBeGreaterThan(50);
      for (const [i, p] of params.entries()) expectClose(await p.grad!.toArray(), grads[i], { atol: 0, rtol: 0 }, `grad ${i}`);
      release(params);
    });

    it(`${device}: aliased gradients (views of one tensor) are each scaled once; strided ones in place of a copy`, async () => {
      const a = tensor([3, 0], { device }).requiresGrad_();
      const b = tensor([0, 0], { device }).requiresGrad_();
      // Autograd gives every leaf its own gradient; a user may still set two .grad views of one tensor.
      const shared = tensor([3, 4], { device });
      a.grad = shared.reshape(2);
      b.grad = shared.reshape(2);
      shared.dispose();
      expect(a.grad.storage).toBe(b.grad.storage);
      const norm = clipGradNorm([a, b], 1);
      expect(await norm.item()).toBeCloseTo(Math.sqrt(50), 5);
      const s = 1 / (Math.sqrt(50) + 1e-6);
      expectClose(await a.grad!.toArray(), [3 * s, 4 * s], { atol: 0, rtol: 1e-6 }, 'a.grad');
      expectClose(await b.grad!.toArray(), [3 * s, 4 * s], { atol: 0, rtol: 1e-6 }, 'b.grad');
      norm.dispose();
      release([a, b]);
    });

    it(`${device}: a bf16 gradient view starting mid-word: only its elements scale`, async () => {
      const whole = tensor([1, 2, 3, 4, 5, 6, 7], { dtype: 'bfloat16', device });
      const p = tensor([0, 0, 0], { dtype: 'bfloat16', device }).requiresGrad_();
      p.grad = whole.narrow(0, 3, 3);
      const norm = clipGradNorm(p, Math.sqrt(16 + 25 + 36) / 2);
      expect(await norm.item()).toBeCloseTo(Math.sqrt(77), 5);
      expect(Array.from(await whole.toArray())).toEqual([1, 2, 3, 2, 2.5, 3, 7].map((x) => roundTo('bfloat16', x)));
      release([p]);
      whole.dispose();
    });

    it(`${device}: NaN in a gradient gives a NaN norm and NaN gradients; no gradients give 0`, async () => {
      const p = tensor([1, 2], { device }).requiresGrad_();
      const q = tensor([1], { device }).requiresGrad_();
      p.grad = tensor([1, NaN], { device });
      q.grad = tensor([2], { device });
      expect(await clipGradNorm([p, q], 1).item()).toBeNaN();
      expect(Array.from(await q.grad.toArray())).toEqual([NaN]);
      p.zeroGrad();
      q.zeroGrad();
      expect(await clipGradNorm([p, q], 1).item()).toBe(0);
      expect(() => clipGradNorm([p], 1, { normType: 3 })).toThrow(RangeError);
      release([p, q]);
    });
  }

  it.skipIf(!gpu.available)('WebGPU: the norm of many large gradients (more partial sums than a workgroup) matches the CPU', async () => {
    // 64 partial sums for each of the five largest: 330 in all, past the combining workgroup's 256 invocations.
    const specs: ParamSpec[] = Array.from({ length: 12 }, (_, i) => ({ shape: [i < 5 ? 70001 + i : 1000 * i + 3], dtype: 'float32' as DType }));
    const onGpu = withGrads('webgpu', 9, specs);
    const onCpu = withGrads('cpu', 9, specs);
    await synchronize();
    const reads = gpuCounters().reads;
    const ng = clipGradNorm(onGpu.params, 3);
    expect(gpuCounters().reads).toBe(reads);
    const nc = clipGradNorm(onCpu.params, 3);
    expect(Math.abs((await ng.item()) - (await nc.item())) / (await nc.item())).toBeLessThan(1e-5);
    for (const [i, p] of onGpu.params.entries())
      expectClose(await p.grad!.toArray(), await onCpu.params[i].grad!.toArray(), { atol: 1e-7, rtol: 2e-6 }, `grad ${i}`);
    release(onGpu.params);
    release(onCpu.params);
  });
});
