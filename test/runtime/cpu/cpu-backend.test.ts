// The CPU backend is the oracle every GPU kernel is judged by, so it is checked on its own against values computed
// by hand (or from closed forms) for each op family: elementwise, promotion, casts, reductions, matmul, views.
import { describe, expect, it } from 'vitest';
import * as tg from '../../../src/index.js';
import { castCode } from '../../../src/core/codecs.js';
import { viewIndices } from '../../../src/runtime/cpu/cpu-backend.js';
import { erfc } from '../../../src/runtime/cpu/scalar-ops.js';
import { expectClose } from '../../helpers/compare.js';

const f32 = (xs: number[]) => xs.map(Math.fround);
const close = { atol: 1e-7, rtol: 2e-7 };

describe('CPU elementwise against closed forms', () => {
  it('unary float ops', async () => {
    const x = tg.tensor([1, 4, 0, -1]);
    const e = Math.E;
    expectClose(await x.exp().toArray(), f32([e, e ** 4, 1, 1 / e]), close);
    expectClose(await x.log().toArray(), f32([0, Math.log(4), -Infinity, NaN]), close);
    expectClose(await x.sqrt().toArray(), [1, 2, 0, NaN], close);
    expectClose(await x.rsqrt().toArray(), [1, 0.5, Infinity, NaN], close);
    expectClose(await x.neg().toArray(), [-1, -4, -0, 1], 'bits');
    expectClose(await x.abs().toArray(), [1, 4, 0, 1], close);
    expectClose(await x.relu().toArray(), [1, 4, 0, 0], close);
    expectClose(await x.sigmoid().toArray(), f32([1 / (1 + 1 / e), 1 / (1 + e ** -4), 0.5, 1 / (1 + e)]), close);
    expectClose(await x.silu().toArray(), f32([1 / (1 + 1 / e), 4 / (1 + e ** -4), 0, -1 / (1 + e)]), close);
    expectClose(await x.tanh().toArray(), f32([Math.tanh(1), Math.tanh(4), 0, -Math.tanh(1)]), close);
    // gelu(x) = x * Phi(x); Phi(1) = 0.841344746068543, Phi(-1) = 0.158655253931457, Phi(4) = 0.999968328758167.
    expectClose(await x.gelu().toArray(), f32([0.841344746068543, 4 * 0.999968328758167, 0, -0.158655253931457]), { atol: 1e-7, rtol: 5e-7 });
    // tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
    const gt = (v: number) => 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3)));
    expectClose(await x.gelu({ approximate: 'tanh' }).toArray(), f32([gt(1), gt(4), 0, gt(-1)]), close);
    expect(Math.abs(gt(1) - 0.8411919906082768)).toBeLessThan(1e-12);
  });

  it('erfc (the gelu reference) is within 1.2e-7 relative of known values', () => {
    const known: [number, number][] = [
      [0, 1],
      [0.5, 0.4795001221869535],
      [-1, 1.8427007929497148],
      [2, 0.004677734981047266],
      [5, 1.5374597944280349e-12],
      [-3, 1.9999779095030015],
    ];
    for (const [x, want] of known) expect(Math.abs(erfc(x) - want) / want, `erfc(${x})`).toBeLessThan(1.2e-7);
  });

  it('binary ops, integer wrap and comparison results', async () => {
    const a = tg.tensor([6, -7, 2.5]);
    const b = tg.tensor([4, 2, -0.5]);
    expect(Array.from(await a.add(b).toArray())).toEqual([10, -5, 2]);
    expect(Array.from(await a.sub(b).toArray())).toEqual([2, -9, 3]);
    expect(Array.from(await a.mul(b).toArray())).toEqual([24, -14, -1.25]);
    expect(Array.from(await a.div(b).toArray())).toEqual([1.5, -3.5, -5]);
    expect(Array.from(await a.maximum(b).toArray())).toEqual([6, 2, 2.5]);
    expect(Array.from(await a.minimum(b).toArray())).toEqual([4, -7, -0.5]);
    expect(await a.gt(b).tolist()).toEqual([true, false, true]);
    expect(await a.le(2.5).tolist()).toEqual([false, true, true]);
    const i = tg.tensor(new Int32Array([7, -7, 2147483647]));
    expect(Array.from(await i.add(1).toArray())).toEqual([8, -6, -2147483648]);
    expect(Array.from(await i.div(2).toArray())).toEqual([3.5, -3.5, 1073741824]);
    expect(i.div(2).dtype).toBe('float32');
    expect(Array.from(await i.mul(tg.tensor(new Int32Array([3, 3, 2]))).toArray())).toEqual([21, -21, -2]);
    const u = tg.tensor(new Uint8Array([250, 3]));
    expect(Array.from(await u.add(10).toArray())).toEqual([4, 13]);
    expect(Array.from(await u.sub(5).toArray())).toEqual([245, 254]);
    expect(Array.from(await tg.tensor([true, false]).add(1).toArray())).toEqual([2, 1]);
  });

  it('f16/bf16 results are the exact result rounded once to the output dtype', async () => {
    const h = tg.tensor([1, 2048], { dtype: 'float16' });
    // 2048 + 1 is a tie in f16 (ulp 2): rounds to even 2048; 1 + 2^-11 would tie too.
    expect(Array.from(await h.add(1).toArray())).toEqual([2, 2048]);
    expect(Array.from(await h.add(3).toArray())).toEqual([4, 2052]);
    const b = tg.tensor([1, 256], { dtype: 'bfloat16' });
    expect(Array.from(await b.add(1).toArray())).toEqual([2, 256]);
    expect(Array.from(await tg.tensor([1 / 3], { dtype: 'float16' }).toArray())).toEqual([0.333251953125]);
  });
});

describe('CPU casts and storage', () => {
  it('castCode: truncation, saturation, wrap, bool, fp8 overflow and saturate', () => {
    expect(castCode(2.9, 'int32')).toBe(2);
    expect(castCode(-2.9, 'int32')).toBe(-2);
    expect(castCode(NaN, 'int32')).toBe(0);
    expect(castCode(1e12, 'int32')).toBe(2147483647);
    expect(castCode(-1e12, 'int32')).toBe(-2147483648);
    expect(castCode(300.5, 'uint8')).toBe(44);
    expect(castCode(-1, 'uint8')).toBe(255);
    expect(castCode(NaN, 'uint8')).toBe(0);
    expect(castCode(NaN, 'bool')).toBe(1);
    expect(castCode(-0, 'bool')).toBe(0);
    expect(castCode(1000, 'float8_e4m3fn')).toBe(0x7f);
    expect(castCode(1000, 'float8_e4m3fn', true)).toBe(0x7e);
    expect(castCode(-1e6, 'float8_e5m2')).toBe(0xfc);
    expect(castCode(-1e6, 'float8_e5m2', true)).toBe(0xfb);
    expect(castCode(1, 'float16')).toBe(0x3c00);
    expect(castCode(1, 'bfloat16')).toBe(0x3f80);
  });

  it('viewIndices walks a strided view in row-major order', () => {
    expect(Array.from(viewIndices({ shape: [2, 3], strides: [1, 2], offset: 1 }))).toEqual([1, 3, 5, 2, 4, 6]);
    expect(Array.from(viewIndices({ shape: [2, 0], strides: [1, 1], offset: 0 }))).toEqual([]);
    expect(Array.from(viewIndices({ shape: [], strides: [], offset: 4 }))).toEqual([4]);
    expect(Array.from(viewIndices({ shape: [3], strides: [0], offset: 2 }))).toEqual([2, 2, 2]);
  });

  it('casts through the public API', async () => {
    const x = tg.tensor([1.5, -1.5, 300, NaN, 1e10]);
    expect(Array.from(await x.to('int32').toArray())).toEqual([1, -1, 300, 0, 2147483647]);
    expect(Array.from(await x.to('uint8').toArray())).toEqual([1, 255, 44, 0, 255]);
    expect(Array.from(await x.to('bool').toArray())).toEqual([1, 1, 1, 1, 1]);
    expect(Array.from(await x.to('float8_e4m3fn').toArray())).toEqual([1.5, -1.5, 288, NaN, NaN]);
    expect(Array.from(await x.to('float8_e5m2', { saturate: true }).toArray())).toEqual([1.5, -1.5, 320, NaN, 57344]);
    expect(Array.from(await x.to('float16').toArray())).toEqual([1.5, -1.5, 300, NaN, Infinity]);
  });
});

describe('CPU reductions and matmul', () => {
  it('reductions along inner/outer dims with strided input', async () => {
    const x = tg.arange(12, undefined, 1, { dtype: 'float32' }).reshape(3, 4); // [[0..3],[4..7],[8..11]]
    expect(await x.sum(0).tolist()).toEqual([12, 15, 18, 21]);
    expect(await x.T.sum(0).tolist()).toEqual([6, 22, 38]);
    expect(await x.mean().item()).toBe(5.5);
    expect(await x.slice(1, 1, undefined, 2).max(1).tolist()).toEqual([3, 7, 11]);
    expect(await x.neg().argmin(1).tolist()).toEqual([3, 3, 3]);
    expect(await x.argmax(0, { keepdim: true }).tolist()).toEqual([[2, 2, 2, 2]]);
    expect(await tg.tensor([3, NaN, 1]).min().item()).toBeNaN();
    expect(await tg.tensor([-Infinity, -Infinity]).argmax().item()).toBe(0);
  });

  it('matmul: batched with broadcast and transposed operands', async () => {
    const a = tg.arange(6, undefined, 1, { dtype: 'float32' }).reshape(1, 2, 3);
    const b = tg.tensor([
      [
        [1, 0],
        [0, 1],
        [1, 1],
      ],
      [
        [2, 0],
        [0, 2],
        [0, 0],
      ],
    ]); // [2, 3, 2]
    expect(await a.matmul(b).tolist()).toEqual([
      [
        [2, 3],
        [8, 9],
      ],
      [
        [0, 2],
        [6, 8],
      ],
    ]);
    expect(await b.transpose(1, 2).matmul(a.select(0, 0).T).tolist()).toEqual([
      [
        [2, 8],
        [3, 9],
      ],
      [
        [0, 6],
        [2, 8],
      ],
    ]);
  });
});
