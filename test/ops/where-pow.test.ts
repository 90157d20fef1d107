// where(cond, a, b) and pow(a, b) on WebGPU vs the CPU backend: every dtype they take, broadcasting, JS numbers on
// either side, PyTorch's promotion, pow's C99 special cases (0 ** 0 = 1, 1 ** NaN = 1, a negative base with a
// non-integer exponent is NaN, signed zeros and infinities), integer pow with wrap-around and negative exponents,
// where's code-exact selection (NaN, -0, FP8), both map kernels (strided and the contiguous fast path), empty
// tensors and errors. Both ops are only an expression in map-ops.ts: this is what the kernel descriptions buy.
import { afterEach, describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { DTypeError, setDefaultDevice, tensor, type DType, type Tensor } from '../../src/index.js';
import { elementwiseTuning } from '../../src/runtime/webgpu/kernels/elementwise.js';
import { BITS, checkBoth, EXACT, expectClose, randomTensor, tolerance, type Tolerance } from '../helpers/compare.js';
import { dispatchesOf, setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

afterEach(() => {
  elementwiseTuning.linearFastPath = true;
});

/** pow's float tolerance: exp2(y log2 x) in f32 errs by about |y log2 x| ulps; narrow outputs by their rounding. */
function powTolerance(dtype: DType): Tolerance {
  return dtype === 'float32' ? { atol: 1e-6, rtol: 3e-5 } : tolerance(dtype, 'transcendental');
}

/** Runs check on both map kernels: the contiguous fast path (where it applies) and the strided kernel. */
async function bothKernels(check: () => Promise<unknown>): Promise<void> {
  await check();
  elementwiseTuning.linearFastPath = false;
  try {
    await check();
  } finally {
    elementwiseTuning.linearFastPath = true;
  }
}

const INF = Infinity;
// [base, exponent, C99 pow] in float32.
const SPECIAL: [number, number, number][] = [
  [0, 0, 1],
  [NaN, 0, 1],
  [INF, 0, 1],
  [-3, -0, 1],
  [1, NaN, 1],
  [1, INF, 1],
  [1, -INF, 1],
  [-1, INF, 1],
  [-1, -INF, 1],
  [-2, 0.5, NaN],
  [-8, 1 / 3, NaN],
  [-0.5, -2.5, NaN],
  [NaN, 1, NaN],
  [2, NaN, NaN],
  [NaN, NaN, NaN],
  [0, -1, INF],
  [-0, -1, -INF],
  [-0, -2, INF],
  [0, -0.5, INF],
  [-0, -INF, INF],
  [0, 2, 0],
  [-0, 3, -0],
  [-0, 2, 0],
  [-0, 0.5, 0],
  [0, INF, 0],
  [INF, -1, 0],
  [INF, 0.5, INF],
  [-INF, 3, -INF],
  [-INF, 2, INF],
  [-INF, -3, -0],
  [-INF, -2, 0],
  [-INF, 0.5, INF],
  [0.5, INF, 0],
  [2, INF, INF],
  [-0.5, INF, 0],
  [-2, INF, INF],
  [0.5, -INF, INF],
  [2, -INF, 0],
  [-2, -INF, 0],
  [-2, 3, -8],
  [-2, 2, 4],
  [2, -2, 0.25],
  [3, 2, 9],
  [-3, 5, -243],
  [10, 20, 1e20],
  [1e20, 2, INF],
  [-2, 1e30, INF],
  [-0.5, 1e30, 0],
  [-2, 16777217, INF],
  [4, 0.5, 2],
  [2, 10, 1024],
  [0.25, -0.5, 2],
  [-1, 1e30, 1],
  [-1, 7, -1],
];

describe.skipIf(!gpu.available)(`pow and where, WebGPU vs CPU ${gpu.skipReason}`, () => {
  it('pow: C99 special cases, bit for bit on both kernels and on the CPU reference', async () => {
    const x = tensor(
      SPECIAL.map((s) => s[0]),
      { dtype: 'float32' },
    );
    const y = tensor(
      SPECIAL.map((s) => s[1]),
      { dtype: 'float32' },
    );
    const want = Float32Array.from(SPECIAL.map((s) => s[2]));
    const cpu = await tg.pow(x, y).toArray();
    expectClose(cpu, want, BITS, 'CPU reference');
    await bothKernels(async () => {
      const r = await checkBoth([x, y], (a, b) => a.pow(b), BITS, 'special cases');
      expectClose(r.gpu, want, BITS, 'WebGPU');
    });
  });

  it('pow: float dtypes, tensor exponents, negative bases with integer exponents, broadcasting, strided views', async () => {
    for (const dtype of ['float32', 'float16', 'bfloat16'] as const) {
      const tol = powTolerance(dtype);
      const base = randomTensor([1029], dtype, 'positive', 3);
      const expo = randomTensor([1029], dtype, 'normal', 2);
      await bothKernels(() => checkBoth([base, expo], (a, b) => a.pow(b), tol, `${dtype} positive ** normal`));
      // Negative bases with integer exponents keep their sign (odd) or lose it (even); non-integers give NaN.
      const neg = randomTensor([7, 33], dtype, 'coarse');
      const ints = tensor(
        Array.from({ length: 33 }, (_, i) => (i % 13) - 6),
        { dtype, shape: [33] },
      );
      await checkBoth([neg, ints], (a, b) => a.pow(b), tol, `${dtype} coarse ** integers (broadcast rows)`);
      await checkBoth([neg, expo], (a, b) => a.pow(b.narrow(0, 0, 33).reshape(1, 33)), tol, `${dtype} coarse ** fractions (NaN where negative)`);
      // Broadcast [3,1,5] ** [4,1] and a transposed base.
      const a = randomTensor([3, 1, 5], dtype, 'positive', 2);
      const b = randomTensor([4, 1], dtype, 'normal');
      await checkBoth([a, b], (p, q) => p.pow(q), tol, `${dtype} [3,1,5] ** [4,1]`);
      const m = randomTensor([6, 9], dtype, 'positive', 2);
      await checkBoth([m, b], (p, q) => p.transpose(0, 1).narrow(0, 1, 4).pow(q.reshape(4, 1)), tol, `${dtype} strided base`);
    }
  });

  it('pow: JS-number exponents and bases', async () => {
    for (const dtype of ['float32', 'float16'] as const) {
      const x = randomTensor([517], dtype, 'normal', 2);
      const p = randomTensor([517], dtype, 'positive', 2);
      for (const e of [2, 3, -1, 0, 1, 0.5, -2.5, 7])
        await bothKernels(() => checkBoth([e === Math.trunc(e) ? x : p], (t) => t.pow(e), powTolerance(dtype), `${dtype} x ** ${e}`));
      await checkBoth([x], (t) => tg.pow(2, t), powTolerance(dtype), `2 ** ${dtype} x`);
      await checkBoth([x], (t) => tg.pow(-2, t), powTolerance(dtype), `-2 ** ${dtype} x (NaN off integers)`);
    }
    // x ** 2 is x * x exactly (squaring path), as PyTorch special-cases it.
    const x = randomTensor([300], 'float32', 'normal', 5);
    const r = await checkBoth([x], (t) => t.pow(2), BITS, 'x ** 2 vs CPU');
    expectClose(r.gpu, await x.mul(x).toArray(), BITS, 'x ** 2 == x * x');
  });

  it('pow: integers (wrap-around, negative exponents, uint8, bool) and promotion', async () => {
    const bases = tensor([0, 1, -1, 2, -2, 3, 7, -5, 12, 46341, 1, -1, 0, 2, -3], { dtype: 'int32' });
    const expos = tensor([0, 5, 3, 10, 9, 4, 11, 7, 9, 2, -3, -3, -1, -1, -2], { dtype: 'int32' });
    await bothKernels(async () => {
      const r = await checkBoth([bases, expos], (a, b) => a.pow(b), EXACT, 'int32 ** int32');
      expect(r.dtype).toBe('int32');
      // PyTorch: (-1) ** -3 = -1, 1 ** -3 = 1, 0 ** -1 = 0, 2 ** -1 = 0; 46341 ** 2 wraps.
      expect(Array.from(r.gpu.slice(9))).toEqual([(46341 * 46341) | 0, 1, -1, 0, 0, 0]);
    });
    const xi = randomTensor([1025], 'int32');
    await bothKernels(() => checkBoth([xi], (t) => t.pow(3), EXACT, 'int32 ** 3'));
    const r = await checkBoth([randomTensor([77], 'int32').abs()], (t) => t.pow(0.5), tolerance('float32', 'transcendental'), 'int32 ** 0.5');
    expect(r.dtype).toBe('float32');
    const u = await checkBoth([randomTensor([99], 'uint8')], (t) => t.pow(2), EXACT, 'uint8 ** 2 (mod 256)');
    expect(u.dtype).toBe('uint8');
    const bl = await checkBoth([randomTensor([40], 'bool')], (t) => t.pow(2), EXACT, 'bool ** 2');
    expect(bl.dtype).toBe('int32');
    const mixed = await checkBoth(
      [randomTensor([50], 'int32'), randomTensor([50], 'float16', 'normal')],
      (a, b) => a.abs().pow(b),
      powTolerance('float16'),
      'int32 ** float16',
    );
    expect(mixed.dtype).toBe('float16');
    const half = await checkBoth(
      [randomTensor([50], 'float16', 'positive'), randomTensor([50], 'float32')],
      (a, b) => a.pow(b),
      powTolerance('float32'),
      'f16 ** f32',
    );
    expect(half.dtype).toBe('float32');
  });

  it('where: every dtype selects codes exactly (NaN, -0, Inf, FP8), with broadcasting', async () => {
    for (const dtype of ['float32', 'float16', 'bfloat16', 'int32', 'uint8', 'bool', 'float8_e4m3fn', 'float8_e5m2'] as const) {
      for (const n of [1, 3, 1025, 4099]) {
        const c = randomTensor([n], 'bool');
        const a = randomTensor([n], dtype, 'normal', 3);
        const b = randomTensor([n], dtype, 'normal', 3);
        await bothKernels(() => checkBoth([c, a, b], (cc, x, y) => tg.where(cc, x, y), BITS, `where ${dtype} [${n}]`));
      }
      const c = randomTensor([3, 1], 'bool');
      const a = randomTensor([1, 4], dtype);
      const b = randomTensor([3, 4], dtype);
      const r = await checkBoth([c, a, b], (cc, x, y) => tg.where(cc, x, y), BITS, `where ${dtype} [3,1] [1,4] [3,4]`);
      expect(r.shape).toEqual([3, 4]);
      const m = randomTensor([5, 6], dtype);
      const m2 = randomTensor([6, 7], dtype);
      await checkBoth([randomTensor([6, 5], 'bool'), m, m2], (cc, x, y) => tg.where(cc, x.transpose(0, 1), y.narrow(1, 2, 5)), BITS, `where ${dtype} strided`);
    }
    const specials = tensor([NaN, -0, Infinity, -Infinity, 1e-40, -NaN, 3.5], { dtype: 'float32' });
    const other = tensor([1, 2, 3, 4, 5, 6, 7], { dtype: 'float32' });
    const c = tensor([1, 1, 1, 1, 1, 0, 1], { dtype: 'bool' });
    await bothKernels(() => checkBoth([c, specials, other], (cc, x, y) => tg.where(cc, x, y), BITS, 'where keeps NaN, -0, Inf, denormals'));
  });

  it('where: mixed dtypes and JS numbers promote as PyTorch does; numbers cost no dispatch', async () => {
    const c = randomTensor([2, 129], 'bool');
    const cases: [string, Tensor | number, Tensor | number, DType][] = [
      ['f16 | f32', randomTensor([2, 129], 'float16'), randomTensor([129], 'float32'), 'float32'],
      ['int32 | f32', randomTensor([2, 129], 'int32'), randomTensor([2, 129], 'float32'), 'float32'],
      ['bool | int32', randomTensor([129], 'bool'), randomTensor([2, 129], 'int32'), 'int32'],
      ['uint8 | int32', randomTensor([129], 'uint8'), randomTensor([2, 129], 'int32'), 'int32'],
      ['f16 | 0', randomTensor([2, 129], 'float16'), 0, 'float16'],
      ['bf16 | -1.3', randomTensor([2, 129], 'bfloat16'), -1.3, 'bfloat16'],
      ['1.5 | int32', 1.5, randomTensor([2, 129], 'int32'), 'float32'],
      ['7 | int32', 7, randomTensor([2, 129], 'int32'), 'int32'],
      ['2 | bool', 2, randomTensor([2, 129], 'bool'), 'int32'],
      ['1 | 0', 1, 0, 'int32'],
      ['0.25 | -1', 0.25, -1, 'float32'],
      ['e4m3 | 0', randomTensor([2, 129], 'float8_e4m3fn'), 0, 'float8_e4m3fn'],
    ];
    for (const [label, a, b, dtype] of cases) {
      const tensors = [c, ...[a, b].filter((t): t is Tensor => typeof t !== 'number')];
      const fn = (...xs: Tensor[]) => {
        let k = 1;
        const pick = (v: Tensor | number) => (typeof v === 'number' ? v : xs[k++]);
        return tg.where(xs[0], pick(a), pick(b));
      };
      await bothKernels(async () => {
        const r = await checkBoth(
          tensors,
          fn,
          dtype.startsWith('float8') || typeof a === 'number' || typeof b === 'number' || a.dtype === b.dtype ? BITS : tolerance(dtype),
          `where ${label}`,
        );
        expect(r.dtype, label).toBe(dtype);
      });
      expect(await dispatchesOf(tensors, fn), `where ${label}: dispatches`).toBe(1);
    }
    // The Tensor method: x.where(cond, other).
    const x = randomTensor([10], 'float32');
    await checkBoth([x, randomTensor([10], 'bool')], (t, cc) => t.where(cc, -1), BITS, 'x.where(cond, -1)');
  });

  it('empty tensors and errors name what is wrong', async () => {
    const e = await tensor([], { dtype: 'float32', shape: [0, 3] }).to('webgpu');
    expect(e.pow(2).shape).toEqual([0, 3]);
    expect(tg.where(await tensor([], { dtype: 'bool', shape: [0, 1] }).to('webgpu'), e, 1).shape).toEqual([0, 3]);
    expect(() => randomTensor([4], 'int32').pow(-1)).toThrow(DTypeError);
    expect(() => randomTensor([4], 'int32').pow(-1)).toThrow(/negative integer powers/);
    expect(() => randomTensor([4], 'float8_e4m3fn').pow(2)).toThrow(DTypeError);
    expect(() => tg.where(randomTensor([4], 'int32'), 1, 0)).toThrow(/condition must be bool, got .*int32/);
    expect(() => tg.where(randomTensor([4], 'bool'), randomTensor([4], 'float8_e4m3fn'), randomTensor([4], 'float32'))).toThrow(DTypeError);
    expect(() => tg.where(randomTensor([3], 'bool'), randomTensor([4], 'float32'), 0)).toThrow(/broadcast|shape/i);
  });
});
