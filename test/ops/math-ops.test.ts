// The math, logical, remainder and division ops (sin ... clamp, logical_*, remainder, fmod, floor_divide): WebGPU
// against the CPU backend on fresh random inputs, odd sizes, both map kernels, special values and empty tensors,
// PyTorch's rules (round half to even, sign(NaN) = 0, remainder's sign rule, integer math), and their gradients
// against central differences.
import { afterEach, describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice, tensor, type Tensor } from '../../src/index.js';
import { elementwiseTuning } from '../../src/runtime/webgpu/kernels/elementwise.js';
import { checkBoth, EXACT, randomTensor, tolerance } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { gradcheck } from '../helpers/gradcheck.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

afterEach(() => {
  elementwiseTuning.linearFastPath = true;
});

const SIZES = [1, 3, 1025, 4099];
const SPECIAL = [NaN, Infinity, -Infinity, 0, -0, 0.5, 1.5, 2.5, -0.5, -2.5, 1e30, -1e-30, 7, -7];
// sin / cos reduce exactly up to |x| = 1e5 only (torch's CPU uses Payne-Hanek beyond): their specials stop there.
const TRIG_SPECIAL = [NaN, Infinity, -Infinity, 0, -0, 0.5, 1.5, 2.5, -0.5, -2.5, 12345.678, -1e-30, 99999, -7];

describe.skipIf(!gpu.available)('unary math ops: WebGPU vs CPU', () => {
  const ops: [string, (x: Tensor) => Tensor, 'simple' | 'transcendental'][] = [
    ['sin', tg.sin, 'transcendental'],
    ['cos', tg.cos, 'transcendental'],
    ['erf', tg.erf, 'transcendental'],
    ['floor', tg.floor, 'simple'],
    ['ceil', tg.ceil, 'simple'],
    ['round', tg.round, 'simple'],
    ['sign', tg.sign, 'simple'],
    ['reciprocal', tg.reciprocal, 'simple'],
  ];
  for (const [name, fn, kind] of ops) {
    it(`${name}: float dtypes, odd sizes, both kernels, strided`, async () => {
      for (const dtype of ['float32', 'float16', 'bfloat16'] as const) {
        for (const n of SIZES) {
          const x = randomTensor([n], dtype, 'normal', 3);
          await checkBoth([x], fn, tolerance(dtype, kind), `${name} ${dtype} [${n}]`);
          elementwiseTuning.linearFastPath = false;
          await checkBoth([x], fn, tolerance(dtype, kind), `${name} ${dtype} [${n}] strided kernel`);
          elementwiseTuning.linearFastPath = true;
          x.dispose();
        }
      }
      const m = randomTensor([7, 5], 'float32', 'normal', 3);
      await checkBoth([m], (t) => fn(t.T), tolerance('float32', kind), `${name} transposed`);
      m.dispose();
    });
    it(`${name}: special values and empty`, async () => {
      const x = tensor(name === 'sin' || name === 'cos' ? TRIG_SPECIAL : SPECIAL, { dtype: 'float32' });
      const r = await checkBoth([x], fn, { atol: 2e-6, rtol: 2e-6 }, `${name} special`);
      x.dispose();
      const e = tg.zeros([0, 3]);
      await checkBoth([e], fn, EXACT, `${name} empty`);
      e.dispose();
      expect(r.cpu.length).toBe(SPECIAL.length);
    });
  }
  it('integer inputs: floor/ceil/round/sign keep int32, sin / reciprocal give float32', async () => {
    const x = randomTensor([1025], 'int32');
    for (const fn of [tg.floor, tg.ceil, tg.round, tg.sign]) {
      const r = await checkBoth([x], fn, EXACT);
      expect(r.dtype).toBe('int32');
    }
    expect((await checkBoth([x], tg.sin, tolerance('float32', 'transcendental'))).dtype).toBe('float32');
    expect((await checkBoth([x], tg.reciprocal, tolerance('float32'))).dtype).toBe('float32');
    x.dispose();
  });
});

describe('unary math ops: torch semantics on the CPU', () => {
  it('round is half to even, sign(NaN) is 0, sin(Inf) is NaN, erf is accurate near 0', async () => {
    expect(Array.from(await tg.round(tensor([0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6])).toArray())).toEqual([0, 2, 2, -0, -2, 2, -3]);
    expect(Array.from(await tg.sign(tensor([NaN, -0, 0, -3, 4, -Infinity])).toArray())).toEqual([0, 0, 0, -1, 1, -1]);
    expect(Array.from(await tg.sin(tensor([Infinity, NaN])).toArray())).toEqual([NaN, NaN]);
    const e = await tg.erf(tensor([1e-8, 0.3, -2, 5])).toArray();
    expect(e[0]).toBeCloseTo(1.1283791670955126e-8, 15);
    expect(e[1]).toBeCloseTo(0.3286267594591112, 7);
    expect(e[2]).toBeCloseTo(-0.9953222650189527, 7);
    expect(e[3]).toBe(1);
  });
  it('clamp: numbers, tensors, one bound, NaN, min > max', async () => {
    const x = tensor([-3, -1, 0, 2, 5, NaN]);
    expect(Array.from(await tg.clamp(x, -1, 2).toArray())).toEqual([-1, -1, 0, 2, 2, NaN]);
    expect(Array.from(await tg.clamp(x, undefined, 0).toArray())).toEqual([-3, -1, 0, 0, 0, NaN]);
    expect(Array.from(await tg.clamp(x, 3, 1).toArray())).toEqual([1, 1, 1, 1, 1, NaN]);
    const lo = tensor([0, 0, 1, 1, 1, 1]);
    expect(Array.from(await x.clamp(lo, 4).toArray())).toEqual([0, 0, 1, 2, 4, NaN]);
    expect(() => tg.clamp(x)).toThrow(/min, max or both/);
  });
  it('logical ops: bool results, NaN is true, broadcasting', async () => {
    const a = tensor([0, 1, NaN, -2]);
    const b = tensor([[0], [3]]);
    expect(Array.from(await tg.logicalAnd(a, b).toArray())).toEqual([0, 0, 0, 0, 0, 1, 1, 1]);
    expect(Array.from(await tg.logicalOr(a, b).toArray())).toEqual([0, 1, 1, 1, 1, 1, 1, 1]);
    expect(Array.from(await tg.logicalXor(a, b).toArray())).toEqual([0, 1, 1, 1, 1, 0, 0, 0]);
    expect(Array.from(await tg.logicalNot(a).toArray())).toEqual([1, 0, 0, 0]);
    expect(tg.logicalAnd(a, b).dtype).toBe('bool');
  });
  it("remainder follows the divisor's sign, fmod the dividend's, floor_divide floors; integers stay integers", async () => {
    const x = tensor([5, -5, 5, -5, 5.5, -0, 3]);
    const y = tensor([3, 3, -3, -3, 2, 2, 0]);
    expect(Array.from(await tg.remainder(x, y).toArray())).toEqual([2, 1, -1, -2, 1.5, -0, NaN]);
    expect(Array.from(await tg.fmod(x, y).toArray())).toEqual([2, -2, 2, -2, 1.5, -0, NaN]);
    expect(Array.from(await tg.floorDivide(x, y).toArray())).toEqual([1, -2, -2, 1, 2, -0, Infinity]);
    const xi = tensor([7, -7, 7, -7, -2147483648], { dtype: 'int32' });
    const yi = tensor([2, 2, -2, -2, -1], { dtype: 'int32' });
    expect(Array.from(await tg.remainder(xi, yi).toArray())).toEqual([1, 1, -1, -1, 0]);
    expect(Array.from(await tg.fmod(xi, yi).toArray())).toEqual([1, -1, 1, -1, 0]);
    expect(Array.from(await tg.floorDivide(xi, yi).toArray())).toEqual([3, -4, -4, 3, -2147483648]);
    expect(tg.remainder(xi, 3).dtype).toBe('int32');
    expect(tg.remainder(xi, 2.5).dtype).toBe('float32');
  });
});

describe.skipIf(!gpu.available)('remainder, fmod, floor_divide: WebGPU vs CPU', () => {
  for (const [name, fn] of [
    ['remainder', tg.remainder],
    ['fmod', tg.fmod],
    ['floorDivide', tg.floorDivide],
  ] as const) {
    it(`${name}: floats (exact), ints, numbers, specials, empty`, async () => {
      for (const n of SIZES) {
        const a = randomTensor([n], 'float32', 'normal', 100);
        const b = randomTensor([n], 'float32', 'normal', 3);
        await checkBoth([a, b], fn, EXACT, `${name} f32 [${n}]`);
        await checkBoth([a], (t) => fn(t, -0.75), EXACT, `${name} f32 by a number`);
        const ai = randomTensor([n], 'int32');
        const bi = randomTensor([n], 'int32');
        await checkBoth([ai, bi], fn, EXACT, `${name} int32`);
        elementwiseTuning.linearFastPath = false;
        await checkBoth([ai, bi], fn, EXACT, `${name} int32 strided kernel`);
        elementwiseTuning.linearFastPath = true;
        for (const t of [a, b, ai, bi]) t.dispose();
      }
      const h = randomTensor([1025], 'float16', 'normal', 20);
      await checkBoth([h], (t) => fn(t, 1.5), EXACT, `${name} f16`);
      const sx = tensor(SPECIAL, { dtype: 'float32' });
      const sy = tensor([2, 3, -3, 0, 5, Infinity, -Infinity, 0.25, -1e-30, 1e30, 7, -7, 3, NaN], { dtype: 'float32' });
      await checkBoth([sx, sy], fn, EXACT, `${name} special`);
      // An integer zero divisor raises on both backends (test/ops/zero-division.test.ts).
      const zi = tensor([5, -5, 0], { dtype: 'int32' });
      expect(() => fn(zi, tg.zeros([3], { dtype: 'int32' }))).toThrow(tg.ZeroDivisionError);
      const e = tg.zeros([0]);
      await checkBoth([e, e], fn, EXACT, `${name} empty`);
      for (const t of [h, sx, sy, zi, e]) t.dispose();
    });
  }
  it('clamp and the logical ops agree', async () => {
    const x = randomTensor([1025], 'float32');
    const y = randomTensor([1025], 'float32');
    await checkBoth([x], (t) => tg.clamp(t, -0.5, 0.5), EXACT);
    await checkBoth([x, y], (t, u) => tg.clamp(t, u.neg().abs().neg(), u.abs()), EXACT);
    await checkBoth([x, y], (t, u) => tg.logicalXor(t.gt(0), u), EXACT);
    await checkBoth([x, y], (t, u) => tg.logicalAnd(t.gt(0), u.lt(0)), EXACT);
    x.dispose();
    y.dispose();
  });
});

describe('math op gradients (central differences on the CPU)', () => {
  it('sin, cos, erf, reciprocal, clamp, remainder, fmod', async () => {
    await gradcheck('sin', (x) => tg.sin(x), [randomTensor([2, 3])]);
    await gradcheck('cos', (x) => tg.cos(x), [randomTensor([2, 3])]);
    await gradcheck('erf', (x) => tg.erf(x), [randomTensor([2, 3])]);
    await gradcheck('reciprocal', (x) => tg.reciprocal(x), [tensor([0.7, -1.3, 2.1, -0.9, 1.6])]);
    await gradcheck('clamp', (x) => tg.clamp(x, -0.5, 0.5), [tensor([-1.3, -0.2, 0.3, 0.9, 2])]);
    await gradcheck('remainder', (x, y) => tg.remainder(x, y), [tensor([5.3, -5.3, 2.2]), tensor([1.7, 2.1, -0.9])]);
    await gradcheck('fmod', (x, y) => tg.fmod(x, y), [tensor([5.3, -5.3, 2.2]), tensor([1.7, 2.1, -0.9])]);
  });
  it('floor, ceil, round, sign have zero gradients', async () => {
    for (const fn of [tg.floor, tg.ceil, tg.round, tg.sign]) {
      const x = tensor([0.3, -1.7]).requiresGrad_();
      fn(x).sum().backward();
      expect(Array.from(await x.grad!.toArray())).toEqual([0, 0]);
    }
  });
});
