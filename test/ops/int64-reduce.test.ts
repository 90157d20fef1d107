// torch's integer semantics on both backends against BigInt expectations: integer sums and products into int64,
// argmax / argmin / sort / topk indices as int64, and int64 inputs for the reductions, floor / trunc division,
// remainder / fmod, sort / topk values and gather (values past 2^32 and 2^53, negatives, the 2^63 ends, odd sizes).
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { DTypeError, setDefaultDevice, tensor, type DeviceName, type Tensor } from '../../src/index.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const MAX = 2n ** 63n - 1n;
const MIN = -(2n ** 63n);
const wrap64 = (v: bigint) => BigInt.asIntN(64, v);

/** Fresh int64 values: small (many ties), past 2^32, past 2^53, the ends, negatives. */
function randomInt64(n: number, seed: number): BigInt64Array {
  let s = BigInt(seed) * 0x9e3779b97f4a7c15n + 7n;
  const next = () => {
    s = BigInt.asUintN(64, s * 6364136223846793005n + 1442695040888963407n);
    return s >> 7n;
  };
  const special = [0n, 1n, -1n, MAX, MIN, 2n ** 32n, -(2n ** 32n), 2n ** 53n + 1n, -(2n ** 53n) - 3n, 4294967295n, 3n, -3n];
  return BigInt64Array.from({ length: n }, (_, i) => {
    const r = next();
    if (i % 4 === 0) return special[(i / 4) % special.length];
    const kind = Number(r % 4n);
    if (kind === 0) return BigInt.asIntN(64, r * 0x1000001n);
    if (kind === 1) return BigInt.asIntN(40, r);
    if (kind === 2) return BigInt.asIntN(56, r);
    return BigInt.asIntN(3, r);
  });
}

const devices: DeviceName[] = gpu.available ? ['cpu', 'webgpu'] : ['cpu'];
const big = async (t: Tensor) => Array.from(await tg.toBigInt64Array(t));
const on = (device: DeviceName, values: BigInt64Array, shape?: number[]) => tensor(values, { device, shape });

/** Rows of a row-major [rows, cols] array along dim (0: the columns, 1: the rows). */
function lines(v: readonly bigint[], rows: number, cols: number, dim: 0 | 1): bigint[][] {
  return dim === 1
    ? Array.from({ length: rows }, (_, r) => v.slice(r * cols, (r + 1) * cols))
    : Array.from({ length: cols }, (_, c) => Array.from({ length: rows }, (_, r) => v[r * cols + c]));
}

const FOLD: Record<'sum' | 'prod' | 'max' | 'min' | 'argmax' | 'argmin', (xs: bigint[]) => bigint> = {
  sum: (xs) => wrap64(xs.reduce((a, b) => a + b, 0n)),
  prod: (xs) => xs.reduce((a, b) => wrap64(a * b), 1n),
  max: (xs) => xs.reduce((a, b) => (b > a ? b : a)),
  min: (xs) => xs.reduce((a, b) => (b < a ? b : a)),
  argmax: (xs) => BigInt(xs.indexOf(FOLD.max(xs))),
  argmin: (xs) => BigInt(xs.indexOf(FOLD.min(xs))),
};

/** The int64 quotient / remainder torch gives (b != 0: a zero divisor raises, test/ops/zero-division.test.ts). */
const DIVIDE: Record<'floor_divide' | 'trunc' | 'remainder' | 'fmod', (a: bigint, b: bigint) => bigint> = {
  floor_divide: (a, b) => wrap64(a / b - (a % b !== 0n && a < 0n !== b < 0n ? 1n : 0n)),
  trunc: (a, b) => wrap64(a / b),
  remainder: (a, b) => (a % b !== 0n && a < 0n !== b < 0n ? (a % b) + b : a % b),
  fmod: (a, b) => a % b,
};

describe.each(devices)('torch integer semantics on %s', (device) => {
  it('sum of int32 / uint8 / bool is int64: exact past int32, over one dim, several, all, keepdim', async () => {
    const n = 4099;
    const values = Array.from({ length: 3 * n }, (_, i) => (i % 7 === 0 ? 2147483647 : i % 5 === 0 ? -2147483648 : (i * 7919) % 100003));
    const x = tensor(new Int32Array(values), { shape: [3, n], device });
    const rows = [0, 1, 2].map((r) => values.slice(r * n, (r + 1) * n).reduce((a, b) => a + BigInt(b), 0n));
    const s1 = x.sum(1);
    expect(s1.dtype).toBe('int64');
    expect(await big(s1)).toEqual(rows);
    expect(await big(x.sum())).toEqual([rows[0] + rows[1] + rows[2]]);
    expect(await big(x.sum([0, 1]))).toEqual([rows[0] + rows[1] + rows[2]]);
    const kept = x.sum([1], { keepdim: true });
    expect([kept.dtype, ...kept.shape]).toEqual(['int64', 3, 1]);
    expect(await big(x.sum(0))).toEqual(Array.from({ length: n }, (_, c) => BigInt(values[c]) + BigInt(values[n + c]) + BigInt(values[2 * n + c])));
    // A strided (transposed) view, uint8 and bool.
    expect(await big(x.T.sum(0))).toEqual(rows);
    const bytes = tensor(new Uint8Array(1001).fill(255), { device });
    expect([bytes.sum().dtype, await bytes.sum().item()]).toEqual(['int64', 255 * 1001]);
    const flags = tensor([true, false, true, true], { shape: [2, 2], device });
    expect(await big(flags.sum(0))).toEqual([2n, 1n]);
    expect(await big(tg.zeros([2, 0], { dtype: 'int32', device }).sum(1))).toEqual([0n, 0n]);
  });

  it('prod of int32 / bool is int64, wrapping modulo 2^64', async () => {
    const x = tensor(new Int32Array([65536, 65536, 3, -7, 2147483647, 2147483647, 2147483647, 5]), { shape: [2, 4], device });
    expect(x.prod(1).dtype).toBe('int64');
    expect(await big(x.prod(1))).toEqual([3n * 2n ** 32n * -7n, wrap64((2n ** 31n - 1n) ** 3n * 5n)]);
    expect(await big(x.prod())).toEqual([wrap64(3n * 2n ** 32n * -7n * (2n ** 31n - 1n) ** 3n * 5n)]);
    expect(await big(tensor([true, true, false], { device }).prod())).toEqual([0n]);
  });

  it('argmax / argmin of floats are int64 indices (first of a tie, NaN wins)', async () => {
    const x = tensor(
      [
        [1, 7, 7, -2],
        [NaN, 0, 9, NaN],
      ],
      { device },
    );
    const a = x.argmax(1);
    expect(a.dtype).toBe('int64');
    expect(await big(a)).toEqual([1n, 0n]);
    expect(await big(x.argmin(1, { keepdim: true }))).toEqual([3n, 0n]);
    expect(await x.argmax().item()).toBe(4);
  });

  it('int64 reductions: sum, prod, max, min, argmax, argmin over each dim, all, several, keepdim', async () => {
    for (const [rows, cols, seed] of [
      [5, 7, 1],
      [3, 33, 2],
      [1, 1, 3],
    ] as const) {
      const v = randomInt64(rows * cols, seed);
      const x = on(device, v, [rows, cols]);
      const all = Array.from(v);
      for (const op of ['sum', 'prod', 'max', 'min', 'argmax', 'argmin'] as const) {
        for (const dim of [0, 1] as const) {
          const r = tg[op](x, dim);
          expect([r.dtype, ...r.shape], `${op}(${dim})`).toEqual(['int64', dim === 0 ? cols : rows]);
          expect(await big(r), `${op}(${dim}) [${rows}, ${cols}]`).toEqual(lines(all, rows, cols, dim).map(FOLD[op]));
        }
        expect(await big(tg[op](x)), `${op}() [${rows}, ${cols}]`).toEqual([FOLD[op](all)]);
        const kept = tg[op](x, 1, { keepdim: true });
        expect(kept.shape).toEqual([rows, 1]);
      }
      for (const op of ['sum', 'prod', 'max', 'min'] as const) {
        expect(await big(tg[op](x, [0, 1])), `${op}([0, 1])`).toEqual([FOLD[op](all)]);
        expect(await big(tg[op](x.T, 1)), `${op} of a transposed view`).toEqual(lines(all, rows, cols, 0).map(FOLD[op]));
      }
    }
    // Long rows (the workgroup tree of the int64 sum), a strided view, past 2^63 (wrapping).
    const long = randomInt64(3 * 1001, 10);
    const l = on(device, long, [3, 1001]);
    const longAll = Array.from(long);
    expect(await big(tg.sum(l, 1))).toEqual(lines(longAll, 3, 1001, 1).map(FOLD.sum));
    expect(await big(tg.sum(l.T, 0))).toEqual(lines(longAll, 3, 1001, 1).map(FOLD.sum));
    expect(await big(tg.sum(l))).toEqual([FOLD.sum(longAll)]);
    expect(await big(tg.max(l, 1))).toEqual(lines(longAll, 3, 1001, 1).map(FOLD.max));
    const m = on(device, randomInt64(12, 9), [3, 4]);
    expect(await big(tg.amax(m, [0, 1]))).toEqual(await big(tg.max(m)));
    expect(await big(tg.amin(m, 1, { keepdim: true }))).toEqual(await big(tg.min(m, 1)));
    // Ties go to the first index; the extremes of int64 themselves.
    const ends = on(device, BigInt64Array.of(5n, MAX, -1n, MAX, MIN, MIN));
    expect(await big(tg.argmax(ends))).toEqual([1n]);
    expect(await big(tg.argmin(ends))).toEqual([4n]);
    expect(await big(tg.max(ends))).toEqual([MAX]);
    expect(await big(tg.min(ends))).toEqual([MIN]);
    const empty = tg.zeros([0], { dtype: 'int64', device });
    expect(await big(tg.prod(empty))).toEqual([1n]);
    expect(() => tg.max(empty)).toThrow(tg.ShapeError);
    expect(() => tg.mean(on(device, BigInt64Array.of(1n)))).toThrow(DTypeError);
  });

  it('floor_divide, div(trunc / floor), remainder, fmod of int64: signs, past 2^53, small divisors, -2^63 / -1', async () => {
    const a = randomInt64(61, 4);
    const b = randomInt64(61, 5).map((v, i) => (i % 9 === 0 ? (i % 2 ? -1n : 1n) : i % 3 === 0 ? BigInt.asIntN(5, v) || 3n : v || 5n));
    a[1] = MIN;
    b[1] = -1n;
    a[2] = MIN;
    b[2] = MAX;
    a[3] = -7n;
    b[3] = 2n;
    const ta = on(device, a);
    const tb = on(device, b);
    const want = (op: keyof typeof DIVIDE) => Array.from(a, (x, i) => DIVIDE[op](x, b[i]));
    expect(await big(tg.floorDivide(ta, tb))).toEqual(want('floor_divide'));
    expect(await big(tg.div(ta, tb, { roundingMode: 'floor' }))).toEqual(want('floor_divide'));
    const trunc = tg.div(ta, tb, { roundingMode: 'trunc' });
    expect(trunc.dtype).toBe('int64');
    expect(await big(trunc)).toEqual(want('trunc'));
    expect(await big(tg.remainder(ta, tb))).toEqual(want('remainder'));
    expect(await big(tg.fmod(ta, tb))).toEqual(want('fmod'));
    // A number divisor, broadcasting, and int32 operands promoted to int64.
    expect(await big(tg.floorDivide(ta, -3))).toEqual(Array.from(a, (x) => DIVIDE.floor_divide(x, -3n)));
    expect(await big(tg.remainder(ta.reshape([61, 1]), tensor([5, -5], { dtype: 'int32', device })))).toEqual(
      Array.from(a).flatMap((x) => [DIVIDE.remainder(x, 5n), DIVIDE.remainder(x, -5n)]),
    );
    expect(tg.floorDivide(ta, 2.5).dtype).toBe('float32');
  });

  it('sort / topk of int64 values: int64 order past 2^32, descending, stable ties; int64 indices', async () => {
    for (const [rows, cols, seed] of [
      [3, 37, 6],
      [2, 600, 7],
    ] as const) {
      const v = randomInt64(rows * cols, seed);
      const x = on(device, v, [rows, cols]);
      for (const descending of [false, true]) {
        const r = tg.sort(x, { descending });
        expect([r.values.dtype, r.indices.dtype]).toEqual(['int64', 'int64']);
        const vals = await big(r.values);
        const idx = (await big(r.indices)).map(Number);
        for (let row = 0; row < rows; row++) {
          const line = Array.from(v.slice(row * cols, (row + 1) * cols));
          const order = line.map((_, i) => i).sort((p, q) => (line[p] === line[q] ? p - q : line[p] < line[q] !== descending ? -1 : 1));
          expect(idx.slice(row * cols, (row + 1) * cols), `sort row ${row} descending ${descending}`).toEqual(order);
          expect(vals.slice(row * cols, (row + 1) * cols)).toEqual(order.map((i) => line[i]));
        }
      }
      const t = tg.topk(x, 5, { dim: 1 });
      const line = Array.from(v.slice(0, cols));
      const top = line
        .map((_, i) => i)
        .sort((p, q) => (line[p] === line[q] ? p - q : line[p] > line[q] ? -1 : 1))
        .slice(0, 5);
      expect((await big(t.indices)).slice(0, 5).map(Number)).toEqual(top);
      expect((await big(t.values)).slice(0, 5)).toEqual(top.map((i) => line[i]));
    }
    // Along dim 0 of a small matrix, and a sort of floats gives int64 indices too.
    const m = on(device, BigInt64Array.of(2n ** 40n, -1n, 2n ** 40n + 1n, -(2n ** 33n)), [2, 2]);
    expect(await big(tg.sort(m, { dim: 0 }).indices)).toEqual([0n, 1n, 1n, 0n]);
    expect(tg.sort(tensor([3, 1, 2], { device })).indices.dtype).toBe('int64');
  });

  it('gather of int64 values (int32 and int64 index, strided x)', async () => {
    const v = randomInt64(4 * 5, 8);
    const x = on(device, v, [4, 5]);
    const index = tensor(new Int32Array([4, 0, 0, 2, 3, 3, 1, 1, 0]), { shape: [3, 3], device });
    const g = tg.gather(x, 1, index);
    expect(g.dtype).toBe('int64');
    const ids = [4, 0, 0, 2, 3, 3, 1, 1, 0];
    expect(await big(g)).toEqual(ids.map((c, i) => v[Math.floor(i / 3) * 5 + c]));
    expect(await big(tg.gather(x.T, 0, index.to('int64')))).toEqual(ids.map((r, i) => v[(i % 3) * 5 + r]));
  });

  it('an op without int64 names what int64 takes', () => {
    const a = on(device, BigInt64Array.of(1n));
    expect(() => tg.softmax(a, -1)).toThrow(/softmax does not support int64.*sum, prod, max, min, argmax, argmin/);
  });
});
