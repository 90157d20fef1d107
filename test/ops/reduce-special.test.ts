// Reductions of integer, bool and fp8 tensors, arg-reductions with ties and NaN, empty dims, on WebGPU against the
// CPU backend; and the CPU backend against hand-computed values.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice, type Tensor } from '../../src/index.js';
import { checkBoth, expectClose, randomTensor, tolerance } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { reduceFn } from './reduce-ops.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

describe.skipIf(!gpu.available)(`integer, bool and fp8 reductions, WebGPU vs CPU ${gpu.skipReason}`, () => {
  it.each(['int32', 'uint8', 'bool'] as const)('sum -> int64, max/min keep %s, argmax/argmin -> int64, mean rejected', async (dtype) => {
    const long = randomTensor([3, 4097, 2], dtype);
    const short = randomTensor([3, 65, 2], dtype);
    for (const op of ['sum', 'max', 'min', 'argmax', 'argmin'] as const) {
      for (const [x, dims] of [
        [long, [1, undefined]],
        [short, [0, 1, 2, -1]],
      ] as const) {
        for (const dim of dims) {
          const r = await checkBoth([x], reduceFn(op, dim), { atol: 0, rtol: 0 }, `${op}(${dim}) ${dtype} ${JSON.stringify(x.shape)}`);
          expect(r.dtype).toBe(op === 'sum' || op.startsWith('arg') ? 'int64' : dtype);
        }
      }
    }
    const x = long;
    expect(() => x.mean()).toThrow(tg.DTypeError);
  });

  it('int32 sums are int64 (torch): exact past int32 on both devices', async () => {
    const fits = tg.tensor(new Int32Array([2147483647, 1, -7, -2147483648, -1, 9]), { shape: [2, 3] });
    const r = await checkBoth([fits], reduceFn('sum', 1), { atol: 0, rtol: 0 });
    expect(r.dtype).toBe('int64');
    expect(Array.from(r.cpu)).toEqual([2147483641, -2147483640]);
    const over = tg.tensor(new Int32Array([2147483647, 1, 1073741824]), { shape: [3] });
    expect(await over.sum().item()).toBe(3221225472);
    const onGpu = await over.to('webgpu');
    const s = onGpu.sum();
    expect(s.dtype).toBe('int64');
    expect(await s.item()).toBe(3221225472);
    [s, onGpu].forEach((t) => t.dispose());
  });

  it('fp8 max/min/argmax work; sum/mean of fp8 are rejected', async () => {
    for (const dtype of ['float8_e4m3fn', 'float8_e5m2'] as const) {
      const x = randomTensor([5, 257], dtype, 'normal', 20);
      for (const op of ['max', 'min', 'argmax', 'argmin'] as const) {
        const r = await checkBoth([x], reduceFn(op, 1), { atol: 0, rtol: 0 }, `${op} ${dtype}`);
        expect(r.dtype).toBe(op.startsWith('arg') ? 'int64' : dtype);
      }
      expect(() => x.sum()).toThrow(tg.DTypeError);
      expect(() => x.mean(0)).toThrow(/mean does not take float8/);
    }
  });
});

describe.skipIf(!gpu.available)(`arg-reductions: ties, NaN, infinities ${gpu.skipReason}`, () => {
  async function bothValues(x: Tensor, fn: (t: Tensor) => Tensor): Promise<number[]> {
    const r = await checkBoth([x], fn, { atol: 0, rtol: 0 });
    return Array.from(r.cpu);
  }

  it('argmax/argmin return the first index of a tie, in every row, long rows too', async () => {
    expect(await bothValues(tg.tensor([1, 3, 3, 2]), (t) => t.argmax())).toEqual([1]);
    expect(await bothValues(tg.tensor([2, 0, 5, 0]), (t) => t.argmin())).toEqual([1]);
    expect(
      await bothValues(
        tg.tensor([
          [7, 7],
          [7, 7],
        ]),
        (t) => t.argmax(1),
      ),
    ).toEqual([0, 0]);
    // Ties far apart in a long row (different invocations find them): the first must win.
    const row = new Float32Array(4097).fill(1);
    row[3000] = 9;
    row[700] = 9;
    row[4000] = 9;
    row[1500] = -9;
    row[260] = -9;
    const x = tg.tensor(row);
    expect(await bothValues(x, (t) => t.argmax())).toEqual([700]);
    expect(await bothValues(x, (t) => t.argmin())).toEqual([260]);
    // Every element equal: index 0.
    expect(await bothValues(tg.full([65537], 2.5), (t) => t.argmax())).toEqual([0]);
    // Random coarse data has many ties.
    const coarse = randomTensor([9, 4097], 'float16', 'coarse');
    await bothValues(coarse, (t) => t.argmax(1));
    await bothValues(coarse, (t) => t.argmin(0));
    const ints = randomTensor([7, 513], 'uint8');
    await bothValues(ints, (t) => t.argmax(1));
  });

  it('NaN wins max/min and argmax/argmin (first NaN); +-Inf are ordinary extremes', async () => {
    const x = tg.tensor([
      [1, NaN, 5, NaN],
      [-Infinity, 2, Infinity, 3],
      [NaN, 1, 2, 3],
      [-Infinity, -Infinity, -Infinity, -Infinity],
    ]);
    expect(await bothValues(x, (t) => t.max(1))).toEqual([NaN, Infinity, NaN, -Infinity]);
    expect(await bothValues(x, (t) => t.min(1))).toEqual([NaN, -Infinity, NaN, -Infinity]);
    expect(await bothValues(x, (t) => t.argmax(1))).toEqual([1, 2, 0, 0]);
    expect(await bothValues(x, (t) => t.argmin(1))).toEqual([1, 0, 0, 0]);
    expect(await bothValues(x, (t) => t.max())).toEqual([NaN]);
    expect(await bothValues(x, (t) => t.argmax())).toEqual([1]);
    // A NaN late in a long row, and sum/mean propagate it.
    const long = new Float32Array(4097).map((_, i) => Math.sin(i));
    long[4001] = NaN;
    long[4050] = NaN;
    const l = tg.tensor(long);
    expect(await bothValues(l, (t) => t.argmax())).toEqual([4001]);
    expect(await bothValues(l, (t) => t.argmin())).toEqual([4001]);
    expect(await bothValues(l, (t) => t.sum())).toEqual([NaN]);
    expect(await bothValues(l.to('bfloat16'), (t) => t.max())).toEqual([NaN]);
    expect(await bothValues(tg.tensor([1, Infinity, -Infinity]), (t) => t.sum())).toEqual([NaN]);
  });
});

describe.skipIf(!gpu.available)(`empty reductions ${gpu.skipReason}`, () => {
  it('sum over an empty dim is 0, mean is NaN, max/min/arg are a ShapeError', async () => {
    const x = tg.zeros([3, 0]);
    const s = await checkBoth([x], (t) => t.sum(1), { atol: 0, rtol: 0 });
    expect(s.shape).toEqual([3]);
    expect(Array.from(s.cpu)).toEqual([0, 0, 0]);
    expect(Array.from((await checkBoth([x], (t) => t.sum(), { atol: 0, rtol: 0 })).cpu)).toEqual([0]);
    expect(Array.from((await checkBoth([x], (t) => t.mean(1), { atol: 0, rtol: 0 })).cpu)).toEqual([NaN, NaN, NaN]);
    const overNonEmpty = await checkBoth([x], (t) => t.sum(0), { atol: 0, rtol: 0 });
    expect(overNonEmpty.shape).toEqual([0]);
    expect(Array.from((await checkBoth([tg.zeros([0], { dtype: 'int32' })], (t) => t.sum(), { atol: 0, rtol: 0 })).cpu)).toEqual([0]);
    for (const op of ['max', 'min', 'argmax', 'argmin'] as const) {
      expect(() => x[op](1)).toThrow(tg.ShapeError);
      expect(() => x[op](1)).toThrow(/size 0/);
      expect(() => x[op]()).toThrow(tg.ShapeError);
      const g = await x.to('webgpu');
      expect(() => g[op](1)).toThrow(tg.ShapeError);
      g.dispose();
      // Over the non-empty dim the result is just empty.
      expect((await checkBoth([x], reduceFn(op, 0), { atol: 0, rtol: 0 })).shape).toEqual([0]);
    }
  });

  it('an out-of-range dim is a ShapeError naming it', () => {
    const x = tg.zeros([2, 3]);
    expect(() => x.sum(2)).toThrow(/dim 2 is out of range/);
    expect(() => x.max(-3)).toThrow(tg.ShapeError);
    expect(() => tg.tensor(1).sum(1)).toThrow(tg.ShapeError);
  });
});

describe('reductions on the CPU against hand-computed values', () => {
  it('sum/mean/max/min/argmax/argmin of a small matrix', async () => {
    const x = tg.tensor([
      [1, 5, -2],
      [4, 0.5, 8],
    ]);
    expect(await x.sum(0).tolist()).toEqual([5, 5.5, 6]);
    expect(await x.sum(1).tolist()).toEqual([4, 12.5]);
    expect(await x.sum().item()).toBe(16.5);
    expect(await x.mean(1, { keepdim: true }).tolist()).toEqual([[4 / 3].map(Math.fround), [12.5 / 3].map(Math.fround)]);
    expect(await x.max(0).tolist()).toEqual([4, 5, 8]);
    expect(await x.min(1).tolist()).toEqual([-2, 0.5]);
    expect(await x.argmax(1).tolist()).toEqual([1, 2]);
    expect(await x.argmin(0).tolist()).toEqual([0, 1, 0]);
    expect(await x.argmax().item()).toBe(5);
    expect(x.argmax(1).dtype).toBe('int64');
    expect(tg.tensor([true, true, false]).sum().dtype).toBe('int64');
    expect(await tg.tensor([true, true, false]).sum().item()).toBe(2);
    expect(
      await tg
        .tensor(new Uint8Array([200, 100]))
        .sum()
        .item(),
    ).toBe(300);
    const h = await tg.tensor([0.1, 0.2, 0.3], { dtype: 'float16' }).sum().toArray();
    expectClose(h, [0.6], tolerance('float16'));
  });
});
