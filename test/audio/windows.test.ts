// hannWindow / hammingWindow / blackmanWindow against torch's formulas written out here (torch.hann_window,
// hamming_window, blackman_window): w[i] = sum_k (-1)^k a_k cos(2 pi k i / M) with M = n (periodic, the default) or
// n - 1 (symmetric), and [1] for n = 1 (torch's special case); n = 1, 2, 7, 400 in both modes. Also the sums of the
// 400-point windows (periodic Hann: n / 2; symmetric: (n - 1) / 2), the constant overlap-add of a periodic Hann at
// hop n / 2, symmetry, n = 0 (an empty tensor), the dtype / device options, and typed errors.
//
// Tolerances: the windows are float64 rounded once to float32; the formula here is the same float64 expression, so
// values agree to float32 rounding (half an ulp, 2^-24 relative) plus 1e-7 absolute for values that are 0 up to
// float64 cancellation (blackman at i = 0 is 0.42 - 0.5 + 0.08 = -1.4e-17). Sums of 400 float32 values are held to
// 1e-4.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice, ShapeError, type Tensor } from '../../src/index.js';
import { expectClose, takeValues } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const TOL = { atol: 1e-7, rtol: 2 ** -24 };

type WindowFn = (n: number, options?: tg.WindowOptions) => Tensor;

/** torch's definitions, independently of src/audio/windows.ts. */
const REFERENCE: Record<string, (i: number, m: number) => number> = {
  hann: (i, m) => 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / m),
  hamming: (i, m) => 0.54 - 0.46 * Math.cos((2 * Math.PI * i) / m),
  blackman: (i, m) => 0.42 - 0.5 * Math.cos((2 * Math.PI * i) / m) + 0.08 * Math.cos((4 * Math.PI * i) / m),
};

const WINDOWS: [string, WindowFn][] = [
  ['hann', tg.hannWindow],
  ['hamming', tg.hammingWindow],
  ['blackman', tg.blackmanWindow],
];

function reference(kind: string, n: number, periodic: boolean): number[] {
  if (n === 1) return [1];
  const m = periodic ? n : n - 1;
  return Array.from({ length: n }, (_, i) => REFERENCE[kind](i, m));
}

describe('windows vs torch formulas', () => {
  for (const [kind, fn] of WINDOWS) {
    for (const periodic of [true, false]) {
      it.each([1, 2, 7, 400])(`${kind} ${periodic ? 'periodic' : 'symmetric'} n = %i`, async (n) => {
        const t = fn(n, { periodic });
        expect(t.shape).toEqual([n]);
        expect(t.dtype).toBe('float32');
        expect(t.device).toBe('cpu');
        expectClose(await takeValues(t), reference(kind, n, periodic), TOL, `${kind} periodic=${periodic} n=${n}`);
      });
    }

    it(`${kind}: periodic is the default, and is the symmetric window of n + 1 without its last sample`, async () => {
      const byDefault = await takeValues(fn(64));
      const periodic = await takeValues(fn(64, { periodic: true }));
      const longer = await takeValues(fn(65, { periodic: false }));
      expect(byDefault).toEqual(periodic);
      expectClose(periodic, longer.subarray(0, 64), TOL, kind);
      // The symmetric window is symmetric.
      const sym = await takeValues(fn(401, { periodic: false }));
      for (let i = 0; i < 401; i++) expect(Math.abs(sym[i] - sym[400 - i])).toBeLessThanOrEqual(1e-7);
    });
  }

  it('small cases spelled out: hann n = 2 is [0, 1] periodic and [0, 0] symmetric; n = 1 is [1]', async () => {
    expect(Array.from(await takeValues(tg.hannWindow(2)))).toEqual([0, 1]);
    expect(Array.from(await takeValues(tg.hannWindow(2, { periodic: false })))).toEqual([0, 0]);
    for (const [, fn] of WINDOWS) {
      expect(Array.from(await takeValues(fn(1)))).toEqual([1]);
      expect(Array.from(await takeValues(fn(1, { periodic: false })))).toEqual([1]);
    }
  });

  it('sums: periodic hann(400) = 200, symmetric 199.5, hamming 0.54 n, blackman 0.42 n; Hann overlap-adds to 1 at hop n / 2', async () => {
    const sum = (v: Float32Array) => v.reduce((a, b) => a + b, 0);
    const hann = await takeValues(tg.hannWindow(400));
    expect(Math.abs(sum(hann) - 200)).toBeLessThan(1e-4);
    expect(Math.abs(sum(await takeValues(tg.hannWindow(400, { periodic: false }))) - 199.5)).toBeLessThan(1e-4);
    expect(Math.abs(sum(await takeValues(tg.hammingWindow(400))) - 216)).toBeLessThan(1e-4);
    expect(Math.abs(sum(await takeValues(tg.blackmanWindow(400))) - 168)).toBeLessThan(1e-4);
    for (let i = 0; i < 200; i++) expect(Math.abs(hann[i] + hann[i + 200] - 1)).toBeLessThanOrEqual(1.2e-7);
    expect(hann[0]).toBe(0);
    expect(hann[200]).toBe(1);
  });

  it('n = 0 gives an empty tensor', async () => {
    for (const [, fn] of WINDOWS) {
      for (const periodic of [true, false]) {
        const t = fn(0, { periodic });
        expect(t.shape).toEqual([0]);
        expect(t.numel).toBe(0);
        expect((await takeValues(t)).length).toBe(0);
      }
    }
  });

  it('dtype option: float16 / bfloat16 hold the float32 window rounded', async () => {
    for (const dtype of ['float16', 'bfloat16'] as const) {
      const t = tg.hannWindow(400, { dtype });
      expect(t.dtype).toBe(dtype);
      const f32 = tg.hannWindow(400).to(dtype) as Tensor;
      expect(await takeValues(t)).toEqual(await takeValues(f32));
    }
  });

  it.skipIf(!gpu.available)(`device option: webgpu holds the same values ${gpu.skipReason}`, async () => {
    for (const [, fn] of WINDOWS) {
      const g = fn(400, { device: 'webgpu' });
      expect(g.device).toBe('webgpu');
      expect(await takeValues(g)).toEqual(await takeValues(fn(400)));
    }
  });

  it.each([-1, 2.5, NaN, Infinity])('n = %d throws ShapeError', (n) => {
    for (const [, fn] of WINDOWS) {
      expect(() => fn(n)).toThrow(ShapeError);
      expect(() => fn(n, { periodic: false })).toThrow(ShapeError);
    }
  });
});
