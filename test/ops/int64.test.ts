// int64: storage, host values, casts, safetensors I64, arithmetic / comparisons wrapping modulo 2^64, sums, cumsum
// and int64 indices, on both backends against BigInt expectations (fresh random values past 2^32 and 2^53,
// negatives, the 2^63 wrap, broadcasting, 0-d and empty), and the DTypeError of an op without int64.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { DTypeError, setDefaultDevice, tensor, type DeviceName, type Tensor } from '../../src/index.js';
import { SafetensorsFile } from '../../src/formats/safetensors-reader.js';
import { tensorSource, writeSafetensors } from '../../src/formats/safetensors-writer.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const MAX = 2n ** 63n - 1n;
const MIN = -(2n ** 63n);
const wrap64 = (v: bigint) => BigInt.asIntN(64, v);

/** Fresh random int64 values: small, past 2^32, past 2^53, near the ends, negatives. */
function randomInt64(n: number, seed: number): BigInt64Array {
  let s = BigInt(seed) * 0x9e3779b97f4a7c15n + 1n;
  const next = () => {
    s = BigInt.asUintN(64, s * 6364136223846793005n + 1442695040888963407n);
    return s;
  };
  const special = [0n, 1n, -1n, MAX, MIN, 2n ** 32n, -(2n ** 32n), 2n ** 53n + 1n, -(2n ** 53n) - 3n, 4294967295n];
  return BigInt64Array.from({ length: n }, (_, i) => {
    const r = next();
    const kind = Number(r % 4n);
    if (i % 5 === 0) return special[(i / 5) % special.length];
    if (kind === 0) return BigInt.asIntN(64, r);
    if (kind === 1) return BigInt.asIntN(40, r);
    if (kind === 2) return BigInt.asIntN(56, r);
    return BigInt.asIntN(12, r);
  });
}

const devices: DeviceName[] = gpu.available ? ['cpu', 'webgpu'] : ['cpu'];
const big = (t: Tensor) => tg.toBigInt64Array(t);
const on = (device: DeviceName, values: BigInt64Array, shape?: number[]) => tensor(values, { device, shape });

describe.each(devices)('int64 on %s', (device) => {
  it('stores numbers and BigInt64Array exactly; tolist/item numbers where safe; toArray refuses', async () => {
    const v = randomInt64(37, 1);
    const t = on(device, v);
    expect(t.dtype).toBe('int64');
    expect(Array.from(await big(t))).toEqual(Array.from(v));
    const safe = tensor([0, -1, 2 ** 53 - 1, -(2 ** 40), 1.9, -1.9], { dtype: 'int64', device });
    expect(await safe.tolist()).toEqual([0, -1, 2 ** 53 - 1, -(2 ** 40), 1, -1]);
    expect(await tensor(-7, { dtype: 'int64', device }).item()).toBe(-7);
    expect(() => tensor([2 ** 53], { dtype: 'int64', device })).toThrow(RangeError);
    await expect(on(device, BigInt64Array.of(2n ** 60n)).tolist()).rejects.toThrow(/toBigInt64Array/);
    await expect(t.toArray()).rejects.toThrow(DTypeError);
    // Strided and offset views read in place.
    const m = on(device, v.slice(0, 36), [6, 6]);
    const view = m.permute([1, 0]).slice(0, 1, 5);
    const expected: bigint[] = [];
    for (let i = 1; i < 5; i++) for (let j = 0; j < 6; j++) expected.push(v[j * 6 + i]);
    expect(Array.from(await big(view))).toEqual(expected);
    expect(Array.from(await big(view.contiguous()))).toEqual(expected);
    expect(Array.from(await big(tg.zeros([3], { dtype: 'int64', device })))).toEqual([0n, 0n, 0n]);
    expect(Array.from(await big(tg.full([2], -(2 ** 40), { dtype: 'int64', device })))).toEqual([-(2n ** 40n), -(2n ** 40n)]);
    expect((await big(tensor([], { dtype: 'int64', device }))).length).toBe(0);
  });

  it('add, sub, mul wrap modulo 2^64; neg; comparisons; broadcasting, 0-d, empty, numbers', async () => {
    const a = randomInt64(4 * 7, 2);
    const b = randomInt64(7, 3);
    const ta = on(device, a, [4, 7]);
    const tb = on(device, b, [7]);
    const ops: [string, (x: Tensor, y: Tensor) => Tensor, (x: bigint, y: bigint) => bigint | boolean][] = [
      ['add', tg.add, (x, y) => wrap64(x + y)],
      ['sub', tg.sub, (x, y) => wrap64(x - y)],
      ['mul', tg.mul, (x, y) => wrap64(x * y)],
      ['maximum', tg.maximum, (x, y) => (x > y ? x : y)],
      ['eq', tg.eq, (x, y) => x === y],
      ['ne', tg.ne, (x, y) => x !== y],
      ['lt', tg.lt, (x, y) => x < y],
      ['le', tg.le, (x, y) => x <= y],
      ['gt', tg.gt, (x, y) => x > y],
      ['ge', tg.ge, (x, y) => x >= y],
    ];
    for (const [name, f, ref] of ops) {
      const r = f(ta, tb);
      const expected = Array.from(a, (x, i) => ref(x, b[i % 7]));
      if (r.dtype === 'bool') expect(Array.from(await r.toArray()), name).toEqual(expected.map((x) => (x ? 1 : 0)));
      else expect(Array.from(await big(r)), name).toEqual(expected);
    }
    // The 2^63 wrap and negation of MIN.
    expect(Array.from(await big(tg.add(on(device, BigInt64Array.of(MAX)), 1)))).toEqual([MIN]);
    expect(Array.from(await big(tg.neg(on(device, BigInt64Array.of(MIN, 5n, -(2n ** 40n))))))).toEqual([MIN, -5n, 2n ** 40n]);
    // 0-d with a number, int64 with int32 (promoted to int64), int64 with float (float32).
    expect(await tg.mul(tensor(3, { dtype: 'int64', device }), -(2 ** 40)).item()).toBe(-3 * 2 ** 40);
    const mixed = tg.add(on(device, BigInt64Array.of(2n ** 40n)), tensor([1], { dtype: 'int32', device }));
    expect(mixed.dtype).toBe('int64');
    expect(Array.from(await big(mixed))).toEqual([2n ** 40n + 1n]);
    const f = tg.add(on(device, BigInt64Array.of(3n)), tensor([0.5], { device }));
    expect(f.dtype).toBe('float32');
    expect(Array.from(await f.toArray())).toEqual([3.5]);
    expect(tg.add(on(device, new BigInt64Array(0), [0, 3]), tb.slice(0, 0, 3)).shape).toEqual([0, 3]);
  });

  it('casts to and from every dtype at the edges', async () => {
    const v = BigInt64Array.of(0n, -1n, 2n ** 31n, -(2n ** 31n) - 1n, 2n ** 24n + 1n, 2n ** 53n + 1n, MAX, MIN, 300n, 16777217n * 2n ** 30n + 1n);
    const t = on(device, v);
    expect(Array.from(await t.to('int32').toArray())).toEqual(Array.from(v, (x) => Number(BigInt.asIntN(32, x))));
    expect(Array.from(await t.to('uint8').toArray())).toEqual(Array.from(v, (x) => Number(BigInt.asUintN(8, x))));
    expect(Array.from(await t.to('bool').toArray())).toEqual(Array.from(v, (x) => (x !== 0n ? 1 : 0)));
    // float32 rounds the exact integer once, to nearest even (2^24 + 1 -> 2^24; a double first would round twice).
    const f32 = Array.from(await t.to('float32').toArray());
    expect(f32.slice(0, 5)).toEqual([0, -1, 2 ** 31, -(2 ** 31), 2 ** 24]);
    expect(f32[6]).toBe(2 ** 63);
    expect(f32[7]).toBe(-(2 ** 63));
    expect(f32[9]).toBe(Math.fround(16777218 * 2 ** 30));
    expect(Array.from(await t.to('float16').toArray()).slice(0, 3)).toEqual([0, -1, Infinity]);
    expect(Array.from(await t.to('bfloat16').toArray()).slice(0, 2)).toEqual([0, -1]);
    // Into int64: floats truncate, NaN -> 0, out of range saturates; int32 sign-extends, uint8/bool zero-extend.
    const fl = tensor([1.9, -1.9, NaN, 1e30, -1e30, 2 ** 40 + 0.5, -0], { device });
    expect(Array.from(await big(fl.to('int64')))).toEqual([1n, -1n, 0n, MAX, MIN, 2n ** 40n, 0n]);
    expect(Array.from(await big(tensor([-2147483648, 5], { dtype: 'int32', device }).to('int64')))).toEqual([-(2n ** 31n), 5n]);
    expect(Array.from(await big(tensor([255, 0], { dtype: 'uint8', device }).to('int64')))).toEqual([255n, 0n]);
    expect(Array.from(await big(tensor([1.5, -3], { dtype: 'bfloat16', device }).to('int64')))).toEqual([1n, -3n]);
  });

  it('sum (int64, exact past 2^53, wrapping) and cumsum', async () => {
    const v = randomInt64(5 * 9, 4);
    const t = on(device, v, [5, 9]);
    const rowSums = Array.from({ length: 5 }, (_, r) => wrap64(v.slice(r * 9, r * 9 + 9).reduce((a, b) => a + b, 0n)));
    const colSums = Array.from({ length: 9 }, (_, c) => wrap64(Array.from({ length: 5 }, (_, r) => v[r * 9 + c]).reduce((a, b) => a + b, 0n)));
    expect(tg.sum(t, 1).dtype).toBe('int64');
    expect(Array.from(await big(tg.sum(t, 1)))).toEqual(rowSums);
    expect(Array.from(await big(tg.sum(t, 0)))).toEqual(colSums);
    expect(Array.from(await big(tg.sum(t)))).toEqual([wrap64(v.reduce((a, b) => a + b, 0n))]);
    expect(Array.from(await big(tg.sum(on(device, BigInt64Array.of(2n ** 62n, 2n ** 62n, 2n ** 53n + 1n)))))).toEqual([wrap64(2n ** 63n + 2n ** 53n + 1n)]);
    const c = tg.cumsum(t, 0);
    const expected: bigint[] = [];
    for (let r = 0; r < 5; r++)
      for (let j = 0; j < 9; j++) expected.push(wrap64(Array.from({ length: r + 1 }, (_, k) => v[k * 9 + j]).reduce((a, b) => a + b, 0n)));
    expect(Array.from(await big(c))).toEqual(expected);
    expect(Array.from(await big(tg.cumsum(tensor([1, 2, 3], { dtype: 'int32', device }), 0, { dtype: 'int64' })))).toEqual([1n, 3n, 6n]);
  });

  it('int64 ids: indexSelect, embedding, gather; an out-of-range id is an IndexError', async () => {
    const w = tensor(
      Array.from({ length: 12 }, (_, i) => i * 1.5),
      { device, shape: [4, 3] },
    );
    const ids = on(device, BigInt64Array.of(3n, 0n, 2n, 2n));
    expect(Array.from(await tg.indexSelect(w, 0, ids).toArray())).toEqual([13.5, 15, 16.5, 0, 1.5, 3, 9, 10.5, 12, 9, 10.5, 12]);
    const e = tg.embedding(on(device, BigInt64Array.of(1n, 3n), [1, 2]), w);
    expect(e.shape).toEqual([1, 2, 3]);
    expect(Array.from(await e.toArray())).toEqual([4.5, 6, 7.5, 13.5, 15, 16.5]);
    const g = tg.gather(w, 1, on(device, BigInt64Array.of(2n, 0n, 1n, 1n), [4, 1]));
    expect(Array.from(await g.toArray())).toEqual([3, 4.5, 10.5, 15]);
    // Selecting rows of an int64 tensor keeps every word.
    const x = on(device, randomInt64(8, 5), [4, 2]);
    const xs = Array.from(await big(x));
    expect(Array.from(await big(tg.indexSelect(x, 0, on(device, BigInt64Array.of(2n, 0n)))))).toEqual([xs[4], xs[5], xs[0], xs[1]]);
    for (const bad of [4n, -1n, 2n ** 32n]) {
      // The CPU raises at once, WebGPU at the read back (the device error flag).
      await expect((async () => tg.indexSelect(w, 0, on(device, BigInt64Array.of(bad))).toArray())()).rejects.toThrow(/indexSelect/);
    }
  });

  it('where, cat, unary ops, and ops without int64 raise a DTypeError naming the op', async () => {
    const a = on(device, BigInt64Array.of(2n ** 40n, -5n, 7n));
    const cond = tensor([true, false, true], { device });
    expect(Array.from(await big(tg.where(cond, a, -(2 ** 35))))).toEqual([2n ** 40n, -(2n ** 35n), 7n]);
    expect(Array.from(await big(tg.cat([a, a.slice(0, 1, 2)])))).toEqual([2n ** 40n, -5n, 7n, -5n]);
    // Float functions of int64 compute on the value as float32 (torch's default float dtype).
    const e = tg.exp(on(device, BigInt64Array.of(-3n, 0n, 2n)));
    expect(e.dtype).toBe('float32');
    const ev = await e.toArray();
    [Math.exp(-3), 1, Math.exp(2)].forEach((want, i) => expect(ev[i]).toBeCloseTo(want, 5));
    // floor / ceil / round keep the integers; relu and sign stay int64.
    const v = on(device, BigInt64Array.of(-(2n ** 40n), 0n, 3n, 2n ** 62n));
    for (const f of [tg.floor, tg.ceil, tg.round]) expect(Array.from(await big(f(v)))).toEqual([-(2n ** 40n), 0n, 3n, 2n ** 62n]);
    expect(Array.from(await big(tg.relu(v)))).toEqual([0n, 0n, 3n, 2n ** 62n]);
    expect(Array.from(await big(tg.sign(v)))).toEqual([-1n, 0n, 1n, 1n]);
    // matmul of integers is composed (test/ops/matmul-int.test.ts), int64 included.
    const mm = tg.matmul(a.reshape([3, 1]), a.reshape([1, 3]));
    expect([mm.dtype, ...mm.shape]).toEqual(['int64', 3, 3]);
    mm.dispose();
    expect(() => tg.mean(a)).toThrow(DTypeError);
    // pow: ATen's powi, wrapping; a tensor exponent below 0 gives 1 / +-1 / 0, a negative number exponent raises.
    const base = on(device, BigInt64Array.of(3n, -2n, 1n, -1n, -1n, 7n, 0n, 2n));
    const expo = on(device, BigInt64Array.of(40n, 63n, -5n, -3n, -4n, -1n, 0n, 64n));
    const want = [3n ** 40n, -(2n ** 63n), 1n, -1n, 1n, 0n, 1n, 0n].map((v) => BigInt.asIntN(64, v));
    expect(Array.from(await big(tg.pow(base, expo)))).toEqual(want);
    expect(Array.from(await big(tg.pow(a, 2)))).toEqual([BigInt.asIntN(64, 2n ** 80n), 25n, 49n]);
    expect(() => tg.pow(a, -1)).toThrow(DTypeError);
  });
});

describe('int64 in safetensors', () => {
  it('I64 round trips and loads as int64 on each device', async () => {
    const v = randomInt64(15, 6);
    const dir = mkdtempSync(join(tmpdir(), 'tg-int64-'));
    const path = join(dir, 'ids.safetensors');
    const t = tensor(v, { shape: [3, 5] });
    await writeSafetensors(path, [['ids', tensorSource(t)]]);
    const f = await SafetensorsFile.open(path);
    try {
      expect(f.entry('ids').format).toBe('I64');
      const bytes = await f.readBytes('ids');
      expect(Array.from(new BigInt64Array(bytes.slice().buffer))).toEqual(Array.from(v));
      for (const device of devices) {
        const loaded = await f.load('ids', { device });
        expect(loaded.dtype).toBe('int64');
        expect(loaded.shape).toEqual([3, 5]);
        expect(Array.from(await tg.toBigInt64Array(loaded))).toEqual(Array.from(v));
        const asF32 = await f.load('ids', { device, dtype: 'float32' });
        expect(asF32.dtype).toBe('float32');
      }
    } finally {
      await f.close();
    }
  });
});
