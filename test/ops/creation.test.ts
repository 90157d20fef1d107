// Tensor creation: tensor() from nested arrays, typed arrays and booleans (dtype inference, ragged input),
// zeros/ones/full/arange, rand/randn under manualSeed (the same values on CPU and WebGPU), tolist/item.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { DTYPES, setDefaultDevice, type DeviceName, type DType } from '../../src/index.js';
import { BITS, checkBoth, expectClose } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const DEVICES: DeviceName[] = gpu.available ? ['cpu', 'webgpu'] : ['cpu'];

describe('tensor(): shape and dtype inference', () => {
  it('nested numbers are float32, booleans are bool, a number is 0-d', async () => {
    const x = tg.tensor([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    expect(x.shape).toEqual([2, 3]);
    expect(x.dtype).toBe('float32');
    expect(x.device).toBe('cpu');
    const b = tg.tensor([[true], [false]]);
    expect(b.dtype).toBe('bool');
    expect(await b.tolist()).toEqual([[true], [false]]);
    const s = tg.tensor(2.5);
    expect(s.shape).toEqual([]);
    expect(await s.item()).toBe(2.5);
    expect(tg.tensor(true).dtype).toBe('bool');
    // A mix of booleans and numbers is numeric.
    const mixed = tg.tensor([true, 2]);
    expect(mixed.dtype).toBe('float32');
    expect(await mixed.tolist()).toEqual([1, 2]);
  });

  it('typed arrays: Int32Array -> int32, Uint8Array -> uint8, float arrays -> float32; shape option', async () => {
    expect(tg.tensor(new Int32Array([1, -2])).dtype).toBe('int32');
    expect(tg.tensor(new Uint8Array([1, 2])).dtype).toBe('uint8');
    expect(tg.tensor(new Float64Array([0.1])).dtype).toBe('float32');
    expect(tg.tensor(new Float32Array(6), { shape: [2, 3] }).shape).toEqual([2, 3]);
    expect(() => tg.tensor(new Float32Array(6), { shape: [4, 2] })).toThrow(/shape \[4, 2\] does not hold 6 values/);
    expect(() => tg.tensor([1, 2, 3], { shape: [2, 2] })).toThrow(tg.ShapeError);
    expect(await tg.tensor([1, 2, 3, 4], { shape: [2, 2] }).tolist()).toEqual([
      [1, 2],
      [3, 4],
    ]);
    expect(await tg.tensor(new Float64Array([0.1])).item()).toBe(Math.fround(0.1));
  });

  it('empty arrays and explicit dtypes', async () => {
    expect(tg.tensor([]).shape).toEqual([0]);
    expect(tg.tensor([]).dtype).toBe('float32');
    expect(tg.tensor([[], []]).shape).toEqual([2, 0]);
    for (const dtype of DTYPES) {
      const x = tg.tensor([1, 0, 2], { dtype });
      expect(x.dtype).toBe(dtype);
      expect(Array.from(await x.toArray())).toEqual(dtype === 'bool' ? [1, 0, 1] : [1, 0, 2]);
    }
    expect(await tg.tensor([300, -1.7], { dtype: 'uint8' }).tolist()).toEqual([44, 255]);
    expect(await tg.tensor([1000], { dtype: 'float8_e4m3fn' }).tolist()).toEqual([NaN]);
    expect(await tg.tensor([1000], { dtype: 'float8_e4m3fn', saturate: true }).tolist()).toEqual([448]);
  });

  it('ragged nested arrays are a ShapeError naming where', () => {
    expect(() => tg.tensor([[1, 2], [3]])).toThrow(tg.ShapeError);
    expect(() => tg.tensor([[1, 2], [3]])).toThrow(/ragged nested array: data\[0\] has shape \[2\] but data\[1\] has \[1\]/);
    expect(() =>
      tg.tensor([
        [[1], [2]],
        [[3], 4],
      ] as never),
    ).toThrow(/data\[1\]\[1\]|data\[1\]/);
    expect(() => tg.tensor([1, [2]] as never)).toThrow(tg.ShapeError);
    expect(() => tg.tensor(['a'] as never)).toThrow(tg.DTypeError);
  });

  it('an unknown dtype name is a DTypeError listing the known ones', () => {
    expect(() => tg.tensor([1], { dtype: 'float64' })).toThrow(/unknown dtype 'float64'; expected one of float32, float16/);
    expect(() => tg.zeros([2], { dtype: 'complex64' })).toThrow(tg.DTypeError);
  });
});

describe.each(DEVICES)('zeros / ones / full / arange on %s', (device) => {
  it('fill every dtype, odd sizes (packed 16- and 8-bit words half full)', async () => {
    for (const dtype of DTYPES) {
      for (const n of [0, 1, 3, 257, 4097]) {
        const z = tg.zeros([n], { dtype, device });
        const o = tg.ones([n], { dtype, device });
        const f = tg.full([n], -2.5, { dtype, device });
        expect(z.device).toBe(device);
        expect(z.dtype).toBe(dtype);
        expect(z.shape).toEqual([n]);
        expect((await z.toArray()).every((v) => v === 0)).toBe(true);
        expect((await o.toArray()).every((v) => v === 1)).toBe(true);
        const want = (await tg.tensor([-2.5], { dtype, device: 'cpu' }).to(dtype).toArray())[0];
        const castWant = dtype === 'int32' ? -2 : dtype === 'uint8' ? 254 : dtype === 'bool' ? 1 : want;
        expect(
          Array.from(await f.toArray()).every((v) => v === castWant),
          `${dtype} ${n}`,
        ).toBe(true);
      }
    }
    expect(tg.zeros([2, 0, 3], { device }).shape).toEqual([2, 0, 3]);
    expect(await tg.full([2], NaN, { device }).tolist()).toEqual([NaN, NaN]);
    expect(await tg.full([2], -0, { device }).toArray()).toEqual(new Float32Array([-0, -0]));
    expect(Object.is((await tg.full([1], -0, { device }).toArray())[0], -0)).toBe(true);
    expect(await tg.full([3], 5, { device, dtype: 'float16' }).tolist()).toEqual([5, 5, 5]);
  });

  it('invalid shapes are a ShapeError naming the size', () => {
    expect(() => tg.zeros([2, -1], { device })).toThrow(/shape \[2, -1\] has an invalid size -1/);
    expect(() => tg.ones([1.5], { device })).toThrow(tg.ShapeError);
    expect(() => tg.full([NaN], 1, { device })).toThrow(tg.ShapeError);
  });

  it('arange: int32 for integer arguments, float32 otherwise; negative steps; empty ranges', async () => {
    const a = tg.arange(5, undefined, 1, { device });
    expect(a.dtype).toBe('int32');
    expect(await a.tolist()).toEqual([0, 1, 2, 3, 4]);
    expect(await tg.arange(2, 11, 3, { device }).tolist()).toEqual([2, 5, 8]);
    expect(await tg.arange(5, 0, -2, { device }).tolist()).toEqual([5, 3, 1]);
    const f = tg.arange(0, 1, 0.25, { device });
    expect(f.dtype).toBe('float32');
    expect(await f.tolist()).toEqual([0, 0.25, 0.5, 0.75]);
    expect(await tg.arange(0, 0.3, 0.1, { device }).tolist()).toEqual([0, 0.1, 0.2].map(Math.fround));
    expect(await tg.arange(0.5, 3, 1, { device }).tolist()).toEqual([0.5, 1.5, 2.5]);
    expect(tg.arange(3, 3, 1, { device }).shape).toEqual([0]);
    expect(tg.arange(3, 0, 1, { device }).shape).toEqual([0]);
    expect(tg.arange(4, undefined, 1, { device, dtype: 'float16' }).dtype).toBe('float16');
    expect(() => tg.arange(0, 5, 0, { device })).toThrow(/step must be a non-zero finite number, got 0/);
    expect(() => tg.arange(0, 5, Infinity, { device })).toThrow(tg.ShapeError);
  });
});

describe('rand / randn under manualSeed', () => {
  it('the same seed gives the same values; a different seed different ones; the generator option is independent', async () => {
    tg.manualSeed(42);
    const a = await tg.randn([1000]).toArray();
    const u = await tg.rand([7]).toArray();
    tg.manualSeed(42);
    const b = await tg.randn([1000]).toArray();
    expect(b).toEqual(a);
    expect(await tg.rand([7]).toArray()).toEqual(u);
    tg.manualSeed(43);
    expect(await tg.randn([1000]).toArray()).not.toEqual(a);
    const g1 = new tg.Generator(7);
    const g2 = new tg.Generator(7);
    tg.manualSeed(1);
    const fromG1 = await tg.randn([5], { generator: g1 }).toArray();
    tg.randn([9]); // advancing the default generator does not touch g2
    expect(await tg.randn([5], { generator: g2 }).toArray()).toEqual(fromG1);
  });

  it('randn is roughly standard normal, rand is uniform in [0, 1) with its mean near 1/2', async () => {
    tg.manualSeed(5);
    const n = Array.from(await tg.randn([100000]).toArray());
    const mean = n.reduce((s, v) => s + v, 0) / n.length;
    const variance = n.reduce((s, v) => s + (v - mean) ** 2, 0) / n.length;
    expect(Math.abs(mean)).toBeLessThan(0.02);
    expect(Math.abs(variance - 1)).toBeLessThan(0.03);
    const u = Array.from(await tg.rand([100000]).toArray());
    expect(u.every((v) => v >= 0 && v < 1)).toBe(true);
    expect(Math.abs(u.reduce((s, v) => s + v, 0) / u.length - 0.5)).toBeLessThan(0.01);
  });

  it('rand stays below 1 in every float dtype (no rounding up to 1 in f16/bf16/fp8)', async () => {
    for (const dtype of ['float32', 'float16', 'bfloat16', 'float8_e4m3fn', 'float8_e5m2'] as const) {
      tg.manualSeed(11);
      const u = await tg.rand([200000], { dtype }).toArray();
      let max = 0;
      let min = 1;
      for (const v of u) {
        max = Math.max(max, v);
        min = Math.min(min, v);
      }
      expect(max, dtype).toBeLessThan(1);
      expect(min, dtype).toBeGreaterThanOrEqual(0);
      expect(max, dtype).toBeGreaterThan(0.8); // still covers the range
      expect(new Set(u).size, dtype).toBeGreaterThan(3);
    }
  });

  it('random tensors must be floating: int dtypes are a DTypeError', () => {
    expect(() => tg.rand([2], { dtype: 'int32' })).toThrow(/random tensors must be floating point, got int32/);
    expect(() => tg.randn([2], { dtype: 'bool' })).toThrow(tg.DTypeError);
  });
});

describe.skipIf(!gpu.available)(`random tensors are identical on CPU and WebGPU ${gpu.skipReason}`, () => {
  it.each(['float32', 'float16', 'bfloat16', 'float8_e4m3fn'] as const)('randn/rand with the same seed, %s', async (dtype: DType) => {
    for (const draw of [tg.randn, tg.rand]) {
      tg.manualSeed(2024);
      const c = draw([4097], { dtype, device: 'cpu' });
      tg.manualSeed(2024);
      const g = draw([4097], { dtype, device: 'webgpu' });
      expect(g.device).toBe('webgpu');
      expect(g.dtype).toBe(dtype);
      expectClose(await g.toArray(), await c.toArray(), BITS, `${draw.name} ${dtype}`);
      // And the copy path agrees too.
      await checkBoth([c], (t) => t.clone(), BITS);
    }
  });

  it('tensor() and arange() upload the same values to WebGPU', async () => {
    const values = [
      [1.5, -2, 1e-3],
      [NaN, Infinity, -0],
    ];
    for (const dtype of DTYPES) {
      const c = tg.tensor(values, { dtype, device: 'cpu' });
      const g = tg.tensor(values, { dtype, device: 'webgpu' });
      expectClose(await g.toArray(), await c.toArray(), BITS, dtype);
      expect(await g.tolist()).toEqual(await c.tolist());
    }
    expect(await tg.arange(1, 10, 2, { device: 'webgpu' }).tolist()).toEqual([1, 3, 5, 7, 9]);
  });
});
