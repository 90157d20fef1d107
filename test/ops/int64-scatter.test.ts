// scatter / scatterAdd with int64: int64 indices (torch's index dtype) and int64 data, on both backends against
// BigInt expectations (values past 2^32 and 2^53, negatives, the 2^63 wrap, duplicate indices, odd sizes, dims 0, 1
// and the last of a 3-D tensor), and out-of-range indices (negative, the dim's size, past 2^31 and 2^32) raising an
// IndexError on both backends without writing anywhere, the next op unaffected.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { DTypeError, IndexError, setDefaultDevice, tensor, type DeviceName, type Tensor } from '../../src/index.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const wrap64 = (v: bigint) => BigInt.asIntN(64, v);
const MAX = 2n ** 63n - 1n;
const MIN = -(2n ** 63n);

/** Fresh int64 values: small, past 2^32 and 2^53, near the ends, negatives. */
function randomInt64(n: number, seed: number): BigInt64Array {
  let s = BigInt(seed) * 0x9e3779b97f4a7c15n + 7n;
  const special = [MAX, MIN, 2n ** 32n - 1n, -(2n ** 32n), 2n ** 53n + 1n, -(2n ** 53n) - 3n, -1n];
  return BigInt64Array.from({ length: n }, (_, i) => {
    s = BigInt.asUintN(64, s * 6364136223846793005n + 1442695040888963407n);
    if (i % 6 === 0) return special[(i / 6) % special.length];
    const bits = [64, 40, 56, 12][Number(s % 4n)];
    return BigInt.asIntN(bits, s >> 3n);
  });
}

/** Fresh indices in [0, size), with repeats. */
function randomIndex(n: number, size: number, seed: number): number[] {
  let s = seed * 2654435761;
  return Array.from({ length: n }, () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return s % size;
  });
}

const strides = (shape: number[]) => shape.map((_, i) => shape.slice(i + 1).reduce((a, b) => a * b, 1));

/** BigInt scatter_add (add) or scatter (hits take the sum of what is written there): the expectation. */
function reference(
  x: bigint[],
  xShape: number[],
  dim: number,
  index: number[],
  iShape: number[],
  src: bigint[],
  sShape: number[],
  mode: 'add' | 'set',
): bigint[] {
  const out = x.slice();
  const sums = new Map<number, bigint>();
  const xs = strides(xShape);
  const ss = strides(sShape);
  const is = strides(iShape);
  for (let e = 0; e < index.length; e++) {
    const coord = iShape.map((n, d) => Math.floor(e / is[d]) % n);
    const to = coord.reduce((a, c, d) => a + (d === dim ? index[e] : c) * xs[d], 0);
    const from = coord.reduce((a, c, d) => a + c * ss[d], 0);
    sums.set(to, wrap64((sums.get(to) ?? 0n) + src[from]));
  }
  for (const [to, v] of sums) out[to] = mode === 'add' ? wrap64(out[to] + v) : v;
  return out;
}

const devices: DeviceName[] = gpu.available ? ['cpu', 'webgpu'] : ['cpu'];
const big = async (t: Tensor) => Array.from(await tg.toBigInt64Array(t));
const int64 = (device: DeviceName, values: BigInt64Array | bigint[], shape: number[]) => tensor(BigInt64Array.from(values), { device, shape });

const CASES: { name: string; x: number[]; dim: number; index: number[]; src: number[] }[] = [
  { name: 'dim 1', x: [5, 7], dim: 1, index: [4, 9], src: [5, 11] },
  { name: 'dim 0', x: [5, 7], dim: 0, index: [9, 6], src: [10, 7] },
  { name: 'dim -1 of 3-D', x: [3, 2, 5], dim: -1, index: [3, 2, 13], src: [3, 2, 13] },
  { name: 'dim 1 of 3-D', x: [3, 4, 5], dim: 1, index: [2, 11, 3], src: [3, 11, 4] },
];

describe.each(devices)('scatter / scatterAdd with int64 on %s', (device) => {
  it.each(CASES)('int64 data, int64 and int32 index, duplicates summed exactly: $name', async ({ x: xShape, dim, index: iShape, src: sShape }) => {
    const n = (s: number[]) => s.reduce((a, b) => a * b, 1);
    const d = dim < 0 ? dim + xShape.length : dim;
    const xv = randomInt64(n(xShape), 11 + n(iShape));
    const sv = randomInt64(n(sShape), 29 + n(sShape));
    const iv = randomIndex(n(iShape), xShape[d], 3 + n(xShape));
    const x = int64(device, xv, xShape);
    const src = int64(device, sv, sShape);
    const added = reference(Array.from(xv), xShape, d, iv, iShape, Array.from(sv), sShape, 'add');
    const written = reference(Array.from(xv), xShape, d, iv, iShape, Array.from(sv), sShape, 'set');
    for (const index of [int64(device, iv.map(BigInt), iShape), tensor(iv, { device, shape: iShape, dtype: 'int32' })]) {
      const a = tg.scatterAdd(x, dim, index, src);
      expect([a.dtype, ...a.shape]).toEqual(['int64', ...xShape]);
      expect(await big(a)).toEqual(added);
      const s = tg.scatter(x, dim, index, src);
      expect(await big(s)).toEqual(written);
      const w = tg.scatter(x, dim, index, -(2 ** 40) - 3);
      expect(await big(w)).toEqual(Array.from(xv, (v, i) => (touched(i) ? -(2n ** 40n) - 3n : v)));
      for (const t of [a, s, w, index]) t.dispose();
    }
    // The positions some index names (for scatter of a number).
    function touched(flat: number): boolean {
      const xs = strides(xShape);
      const is = strides(iShape);
      return iv.some((v, e) => iShape.map((m, k) => Math.floor(e / is[k]) % m).reduce((acc, c, k) => acc + (k === d ? v : c) * xs[k], 0) === flat);
    }
    // x itself is untouched (scatter is out of place).
    expect(await big(x)).toEqual(Array.from(xv));
  });

  it('many duplicates (more than a workgroup) onto two positions add up past 2^53 and wrap at 2^63', async () => {
    const count = 601;
    const sv = Array.from({ length: count }, (_, i) => (i % 2 === 0 ? 2n ** 60n + 0xfffffff0n + BigInt(i) : -(2n ** 33n) + 1n));
    const x = int64(device, [MAX, 5n, -7n], [3]);
    const idx = int64(
      device,
      new Array<bigint>(count).fill(0n).map((_, i) => (i % 5 === 0 ? 2n : 0n)),
      [count],
    );
    const got = await big(tg.scatterAdd(x, 0, idx, int64(device, sv, [count])));
    let at0 = MAX;
    let at2 = -7n;
    sv.forEach((v, i) => (i % 5 === 0 ? (at2 = wrap64(at2 + v)) : (at0 = wrap64(at0 + v))));
    expect(got).toEqual([at0, 5n, at2]);
  });

  it('float data takes an int64 index', async () => {
    const x = tensor([0.5, 1, 2, 3, 4, 5], { device, shape: [2, 3] });
    const idx = int64(device, [2n, 2n, 0n, 1n], [2, 2]);
    const src = tensor([1, 2, 3, 4], { device, shape: [2, 2] });
    expect(await tg.scatterAdd(x, 1, idx, src).tolist()).toEqual([
      [0.5, 1, 5],
      [6, 8, 5],
    ]);
    expect(await tg.scatter(x, 1, idx, src).tolist()).toEqual([
      [0.5, 1, 3],
      [3, 4, 5],
    ]);
  });

  it('an out-of-range index raises an IndexError (CPU at once, WebGPU at the read back) and writes nowhere', async () => {
    const xv = [1n, 2n ** 40n, -3n, 4n, 5n, 6n];
    const x = int64(device, xv, [2, 3]);
    const xf = tensor([1, 2, 3, 4, 5, 6], { device, shape: [2, 3] });
    const src = int64(device, [10n, 20n, 30n, 40n], [2, 2]);
    // 3 (the size) in row 0 would be row 1's first element once flattened; 2^32 + 1 narrows to 1 by its low word.
    for (const bad of [-1n, 3n, 2n ** 31n, 2n ** 32n + 1n, -(2n ** 32n), MIN]) {
      const idx = int64(device, [0n, bad, 1n, 2n], [2, 2]);
      for (const op of [() => tg.scatterAdd(x, 1, idx, src), () => tg.scatter(x, 1, idx, src)]) {
        await expect((async () => big(op()))(), `${bad}`).rejects.toThrow(IndexError);
      }
      await expect((async () => tg.scatterAdd(xf, 1, idx, tensor([1, 2, 3, 4], { device, shape: [2, 2] })).toArray())()).rejects.toThrow(/scatter/);
      idx.dispose();
    }
    const narrow = tensor([0, 3, 1, 2], { device, shape: [2, 2], dtype: 'int32' });
    await expect((async () => tg.scatterAdd(xf, 1, narrow, tensor([1, 2, 3, 4], { device, shape: [2, 2] })).toArray())()).rejects.toThrow(IndexError);
    // Nothing was written and the next ops run as usual.
    expect(await big(x)).toEqual(xv);
    expect(await xf.tolist()).toEqual([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    const ok = tg.scatterAdd(x, 1, int64(device, [0n, 0n, 2n, 2n], [2, 2]), src);
    expect(await big(ok)).toEqual([31n, 2n ** 40n, -3n, 4n, 5n, 76n]);
  });

  it('dtype mismatches raise a DTypeError', () => {
    const x = int64(device, [1n, 2n], [2]);
    const idx = int64(device, [0n], [1]);
    expect(() => tg.scatterAdd(x, 0, idx, tensor([1], { device }))).toThrow(DTypeError);
    expect(() => tg.scatterAdd(tensor([1, 2], { device }), 0, idx, int64(device, [1n], [1]))).toThrow(DTypeError);
    expect(() => tg.scatterAdd(x, 0, tensor([0], { device }), x)).toThrow(DTypeError);
  });
});
