// The tiled GEMM's subgroup variant (A values shared by subgroupShuffle instead of a workgroup-memory tile) against
// the CPU backend, with subgroups on and off: ragged shapes, batches, a transposed weight view, f16/bf16 operands,
// FP8 scaledMm with block scales and NaN propagation. Every run checks which GEMM pipeline ran, so a device or
// a selection bug that silently falls back to the plain tile cannot pass for the subgroup path.
import { describe, expect, it } from 'vitest';
import { webgpuBackend } from '../../src/runtime/registry.js';
import { gemmShareWidth, gemmTuning } from '../../src/kernels/matmul/gemm.js';
import { scaledMm, setDefaultDevice, tensor, type DType, type Tensor } from '../../src/index.js';
import { checkBoth, randomTensor, randomValues, tolerance, type Tolerance } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

/** f32 dot products of length k: rounding grows ~sqrt(k); the output dtype's rounding comes on top. */
function mmTol(dtype: DType, k: number): Tolerance {
  const t = tolerance(dtype, 'accumulate');
  return { atol: t.atol + 2e-6 * Math.sqrt(Math.max(k, 1)), rtol: t.rtol };
}

const gemmKeys: string[] = [];
if (gpu.available) {
  const be = webgpuBackend()!;
  const original = be.pipeline.bind(be);
  be.pipeline = (...args: Parameters<typeof original>) => {
    if (args[0].startsWith('gemm|')) gemmKeys.push(args[0]);
    return original(...args);
  };
}

describe.skipIf(!gpu.available)(`tiled GEMM with and without subgroups, WebGPU vs CPU ${gpu.skipReason}`, () => {
  const be = webgpuBackend()!;
  // Cover the narrow (staged) sharing too, which production only uses from 16 lanes.
  gemmTuning.minShareWidth = 4;
  // describe.skipIf still runs this body to collect the (skipped) tests: without a device there is no backend.
  const initial = be?.subgroupsEnabled ?? false;
  const share = initial ? gemmShareWidth(be) : 0;
  const defaultDirect = gemmTuning.directALoadWidth;
  // Subgroup modes only where the device gives the GEMM a sharing width; the plain tile always. Where that width
  // is under 16 (SwiftShader: 4) the A tile is staged before the shuffles; lowering directALoadWidth also runs the
  // path wide-subgroup GPUs take, with A loaded straight into registers.
  type Mode = 'off' | 'staged' | 'direct';
  const modes: Mode[] = share === 0 ? ['off'] : share < defaultDirect ? ['staged', 'direct', 'off'] : ['direct', 'off'];
  const variant = (mode: Mode) => (mode === 'off' ? 'sg0' : `sg${share}${mode}`);

  /** Runs fn on both backends in this mode and checks that every GEMM dispatch used its pipeline variant. */
  async function check(mode: Mode, inputs: Tensor[], fn: (...xs: Tensor[]) => Tensor, tol: Tolerance, label: string): Promise<void> {
    be.subgroupsEnabled = mode !== 'off';
    if (mode === 'direct') gemmTuning.directALoadWidth = share;
    gemmKeys.length = 0;
    try {
      await checkBoth(inputs, fn, tol, `${mode}: ${label}`);
    } finally {
      be.subgroupsEnabled = initial;
      gemmTuning.directALoadWidth = defaultDirect;
      inputs.forEach((t) => t.dispose());
    }
    expect(gemmKeys.length, `${label}: GEMM dispatches`).toBeGreaterThan(0);
    for (const key of gemmKeys) expect(key.endsWith(`|${variant(mode)}`), `${label}: pipeline ${key}`).toBe(true);
  }

  it('uses the subgroup variant where the adapter has subgroups (SwiftShader: width 4)', () => {
    const info = be.gpuDevice.adapterInfo as GPUAdapterInfo & { subgroupMinSize?: number };
    if (!be.adapter.features.includes('subgroups') || process.env.TENSORGPU_DISABLE_SUBGROUPS === '1') return;
    expect(initial).toBe(true);
    expect(share).toBe(Math.min(16, info.subgroupMinSize ?? 0) >= 4 ? Math.min(16, info.subgroupMinSize!) : 0);
    be.subgroupsEnabled = false;
    try {
      expect(gemmShareWidth(be)).toBe(0);
    } finally {
      be.subgroupsEnabled = initial;
    }
  });

  describe.each(modes)('A values: %s', (mode) => {
    it.each([
      [5, 7, 3],
      [65, 130, 33],
      [128, 64, 200],
    ])('float32 M x N x K = %i x %i x %i', async (m, n, k) => {
      await check(mode, [randomTensor([m, k]), randomTensor([k, n])], (a, b) => a.matmul(b), mmTol('float32', k), `${m}x${n}x${k}`);
    });

    it('batched, with broadcast batch dims: [3,m,k] @ [3,k,n], [2,1,m,k] @ [3,k,n]', async () => {
      await check(mode, [randomTensor([3, 67, 21]), randomTensor([3, 21, 70])], (a, b) => a.matmul(b), mmTol('float32', 21), 'batch 3');
      await check(mode, [randomTensor([2, 1, 9, 40]), randomTensor([3, 40, 66])], (a, b) => a.matmul(b), mmTol('float32', 40), 'broadcast 2x3');
    });

    it('a transposed [N, K] weight view (x @ w.T, no copy) and a transposed activation', async () => {
      await check(mode, [randomTensor([70, 99]), randomTensor([45, 99])], (x, w) => x.matmul(w.T), mmTol('float32', 99), 'x @ w.T');
      await check(mode, [randomTensor([99, 70]), randomTensor([99, 45])], (x, w) => x.T.matmul(w), mmTol('float32', 99), 'x.T @ w');
    });

    it.each(['float16', 'bfloat16'] as const)('%s operands', async (dtype) => {
      await check(mode, [randomTensor([65, 33], dtype), randomTensor([33, 130], dtype)], (a, b) => a.matmul(b), mmTol(dtype, 33), dtype);
    });

    it('FP8 scaledMm with 1x128 / 128x128 block scales (K = 300: a partial block)', async () => {
      const [m, n, k] = [70, 200, 300];
      const kb = Math.ceil(k / 128);
      const a = randomTensor([m, k], 'float8_e4m3fn');
      const w = randomTensor([n, k], 'float8_e4m3fn');
      const sa = tensor(randomValues(m * kb, 'float32', 'positive'), { shape: [m, kb], dtype: 'float32', device: 'cpu' });
      const sb = tensor(randomValues(Math.ceil(n / 128) * kb, 'float32', 'positive'), { shape: [Math.ceil(n / 128), kb], dtype: 'float32', device: 'cpu' });
      await check(
        mode,
        [a, w, sa, sb],
        (a, w, sa, sb) => scaledMm(a, w.T, { scaleA: sa, scaleB: sb, outDtype: 'float32' }),
        { atol: 1e-4, rtol: 1e-4 },
        'fp8 block',
      );
    });

    it('NaN in A poisons exactly its output row, NaN in B exactly its column', async () => {
      // Rows and k positions spread over row groups, lanes and registers of the shared A values.
      const [m, n, k] = [70, 75, 37];
      const av = randomValues(m * k, 'float32');
      for (const [r, q] of [
        [0, 0],
        [5, 17],
        [38, 3],
        [66, 36],
      ])
        av[r * k + q] = NaN;
      const bv = randomValues(k * n, 'float32');
      for (const [q, c] of [
        [2, 1],
        [30, 64],
      ])
        bv[q * n + c] = NaN;
      const a = tensor(av, { shape: [m, k], dtype: 'float32', device: 'cpu' });
      const b = tensor(bv, { shape: [k, n], dtype: 'float32', device: 'cpu' });
      await check(mode, [a, b], (a, b) => a.matmul(b), mmTol('float32', k), 'NaN');
    });
  });
});
