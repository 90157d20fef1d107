// Casts between every pair of dtypes (to(dtype)), bit-exact on both backends, plus hand-written expectations for the
// rules that are easy to get wrong: float -> int truncates and saturates (NaN -> 0), uint8 wraps, bool is x != 0,
// fp8 overflows to NaN (e4m3fn) / Inf (e5m2) unless saturating. Also reading values out (toArray, tolist, item) and
// moving between devices.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { DTYPES, setDefaultDevice, type DType, type Tensor } from '../../src/index.js';
import { BITS, checkBoth, expectClose, nextSeed, randomValues } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const NAN = NaN;
const INF = Infinity;
/** A float32 NaN with the sign bit set (fp8/f16 casts keep the sign of NaN, as PyTorch's do). */
const NEG_NAN = new Float32Array(new Uint32Array([0xffc00000]).buffer)[0];

/** Values that sit on every boundary of every format: zeros, subnormals, rounding midpoints, overflow thresholds. */
const FLOAT_EDGES = [
  0,
  -0,
  1,
  -1,
  0.5,
  -2.75,
  2.7,
  -2.7,
  0.99,
  -0.99,
  1e-3,
  6e-8,
  3e-8,
  1e-40,
  -1e-40,
  2 ** -9,
  2 ** -10,
  127.5,
  128.5,
  255.5,
  255.9,
  256,
  300.7,
  -1.5,
  -129,
  65504,
  65519,
  65520,
  448,
  464,
  465,
  500,
  57344,
  60000,
  61440,
  70000,
  16777217,
  2147483520,
  2147483648,
  3e9,
  -3e9,
  1e10,
  -1e10,
  1e38,
  INF,
  -INF,
  NAN,
];

function floatSource(dtype: DType): Tensor {
  const values = [...FLOAT_EDGES, ...randomValues(2048, 'float32', 'normal', nextSeed(), 1), ...randomValues(2049, 'float32', 'normal', nextSeed(), 300)];
  return tg.tensor(values, { dtype });
}

function sourceOf(dtype: DType): Tensor {
  switch (dtype) {
    case 'int32': {
      const g = new tg.Generator(nextSeed());
      const edges = [0, 1, -1, 127, 128, 255, 256, -129, 300, 448, 500, 65504, 65520, 70000, 16777217, 16842753, 2147483647, -2147483648];
      const values = new Int32Array(4097);
      values.set(edges);
      for (let i = edges.length; i < values.length; i++) values[i] = i % 2 ? g.nextU32() | 0 : (g.nextU32() % 2001) - 1000;
      return tg.tensor(values);
    }
    case 'uint8':
      return tg.tensor(Uint8Array.from({ length: 4097 }, (_, i) => (i * 37) & 255));
    case 'bool':
      return tg.tensor(
        Uint8Array.from({ length: 4097 }, (_, i) => ((i * 7919) % 3 === 0 ? 1 : 0)),
        { dtype: 'bool' },
      );
    default:
      return floatSource(dtype);
  }
}

describe.skipIf(!gpu.available)(`casts between every pair of dtypes, WebGPU vs CPU bit-exact ${gpu.skipReason}`, () => {
  for (const src of DTYPES) {
    it(`${src} -> every dtype (contiguous and strided, fp8 with and without saturate)`, async () => {
      const x = sourceOf(src);
      for (const dst of DTYPES) {
        const r = await checkBoth([x], (t) => t.to(dst), BITS, `${src} -> ${dst}`);
        expect(r.dtype).toBe(dst);
        expect(r.shape).toEqual(x.shape);
        // A strided source starting mid-word, odd length.
        await checkBoth([x], (t) => t.slice(0, 1, -2, 3).to(dst), BITS, `${src}[1::3] -> ${dst}`);
        if (dst === 'float8_e4m3fn' || dst === 'float8_e5m2') {
          await checkBoth([x], (t) => t.to(dst, { saturate: true }), BITS, `${src} -> ${dst} saturate`);
        }
      }
      x.dispose();
    });
  }

  it('a cast to the same dtype is a copy (new storage), not a view', async () => {
    const x = tg.tensor([1, 2, 3], { device: 'webgpu' });
    const y = x.to('float32');
    x.dispose();
    expect(Array.from(await y.toArray())).toEqual([1, 2, 3]);
    y.dispose();
  });
});

/** Casts on both devices and checks both against hand-written results. */
async function expectCast(values: number[] | Int32Array | Uint8Array, from: DType, to: DType, want: number[], saturate = false): Promise<void> {
  const x = tg.tensor(values as number[], { dtype: from });
  const label = `${from} -> ${to}${saturate ? ' saturate' : ''}`;
  const cpu = await x.to(to, { saturate }).toArray();
  expectClose(cpu, want, BITS, `${label} (CPU)`);
  if (gpu.available) {
    const g = await x.to('webgpu');
    expectClose(await g.to(to, { saturate }).toArray(), want, BITS, `${label} (WebGPU)`);
    g.dispose();
  }
}

describe(`cast rules against hand-written values (CPU${gpu.available ? ' and WebGPU' : ''})`, () => {
  it('float -> int32 truncates toward zero, saturates, NaN -> 0', async () => {
    const x = [2.7, -2.7, NAN, 1e10, -1e10, INF, -INF, -0, 0.99, 2147483520, -2147483648];
    const want = [2, -2, 0, 2147483647, -2147483648, 2147483647, -2147483648, 0, 0, 2147483520, -2147483648];
    for (const from of ['float32', 'float16', 'bfloat16'] as const) {
      const rounded = Array.from(await tg.tensor(x, { dtype: from }).toArray());
      await expectCast(
        x,
        from,
        'int32',
        rounded.map((v) => (Number.isNaN(v) ? 0 : Math.max(-2147483648, Math.min(2147483647, Math.trunc(v))) || 0)),
      );
    }
    await expectCast(x, 'float32', 'int32', want);
  });

  it('float -> uint8 truncates then wraps mod 256 (NaN -> 0)', async () => {
    await expectCast([300.7, -1.5, 256, 255.9, NAN, -256, 1e10, 0.5, -0.5, 511], 'float32', 'uint8', [44, 255, 0, 255, 0, 0, 255, 0, 0, 255]);
    await expectCast([300, -1, 255, 256], 'float16', 'uint8', [44, 255, 255, 0]);
  });

  it('anything -> bool is x != 0 (NaN is true, -0 is false)', async () => {
    await expectCast([NAN, -0, 0, 0.1, -INF, 1e-40], 'float32', 'bool', [1, 0, 0, 1, 1, 1]);
    await expectCast([-0, 6e-8, NAN], 'float16', 'bool', [0, 1, 1]);
    await expectCast(new Int32Array([0, -1, 256]), 'int32', 'bool', [0, 1, 1]);
    await expectCast(new Uint8Array([0, 255]), 'uint8', 'bool', [0, 1]);
  });

  it('bool and integers -> float; integers -> narrower integers wrap', async () => {
    await expectCast(new Uint8Array([1, 0]), 'bool', 'float32', [1, 0]);
    await expectCast(new Uint8Array([1, 0]), 'bool', 'float8_e4m3fn', [1, 0]);
    await expectCast(new Int32Array([300, -1, 255, 256, -2147483648]), 'int32', 'uint8', [44, 255, 255, 0, 0]);
    await expectCast(new Uint8Array([255, 0, 128]), 'uint8', 'int32', [255, 0, 128]);
    await expectCast(new Int32Array([70000, 65504, -70000, 65519, 65520]), 'int32', 'float16', [INF, 65504, -INF, 65504, INF]);
    await expectCast(new Uint8Array([255, 17, 240, 247, 248]), 'uint8', 'float8_e4m3fn', [256, 16, 240, 240, 256]);
    await expectCast(new Int32Array([16777217, -16777217]), 'int32', 'float32', [16777216, -16777216]);
  });

  it('float32 -> float8_e4m3fn: overflow (> 464) and Inf are NaN; saturate clamps to 448, NaN stays NaN', async () => {
    const x = [500, -500, 448, 464, 465, INF, -INF, NAN, 1e-9, -0, 0.1];
    await expectCast(x, 'float32', 'float8_e4m3fn', [NAN, NEG_NAN, 448, 448, NAN, NAN, NEG_NAN, NAN, 0, -0, 0.1015625]);
    await expectCast(x, 'float32', 'float8_e4m3fn', [448, -448, 448, 448, 448, 448, -448, NAN, 0, -0, 0.1015625], true);
  });

  it('float32 -> float8_e5m2: overflow (>= 61440) is Inf; saturate clamps to 57344', async () => {
    const x = [70000, 57344, 61440, 60000, INF, -INF, NAN, -61439];
    await expectCast(x, 'float32', 'float8_e5m2', [INF, 57344, INF, 57344, INF, -INF, NAN, -57344]);
    await expectCast(x, 'float32', 'float8_e5m2', [57344, 57344, 57344, 57344, 57344, -57344, NAN, -57344], true);
  });

  it('between 16-bit floats: f16 -> bf16 -> f16', async () => {
    await expectCast([65504, 1 / 3, 6e-8, -0], 'float16', 'bfloat16', [65536, 0.333984375, 5.9604644775390625e-8, -0]);
    await expectCast([1e5, 1 / 3, 1e-10, -INF], 'bfloat16', 'float16', [INF, 0.333984375, 0, -INF]);
  });

  it('dtype names: aliases are accepted, an unknown name is a DTypeError naming it', () => {
    const x = tg.tensor([1.5]);
    expect(x.to('f16' as DType).dtype).toBe('float16');
    expect(x.to('bf16' as DType).dtype).toBe('bfloat16');
    expect(x.to('int' as DType).dtype).toBe('int32');
    expect(x.to('e5m2' as DType).dtype).toBe('float8_e5m2');
    expect(() => x.to('float64' as DType)).toThrow(/unknown dtype 'float64'/);
    expect(() => x.to('float64' as DType)).toThrow(tg.DTypeError);
  });
});

describe('reading values out: toArray, tolist, item', () => {
  it('toArray widens: Float32Array for every float dtype, Int32Array for int32, Uint8Array for uint8/bool', async () => {
    const kinds: Record<DType, string> = {
      float32: 'Float32Array',
      float16: 'Float32Array',
      bfloat16: 'Float32Array',
      float8_e4m3fn: 'Float32Array',
      float8_e5m2: 'Float32Array',
      int32: 'Int32Array',
      uint8: 'Uint8Array',
      bool: 'Uint8Array',
      int64: 'BigInt64Array',
    };
    for (const dtype of DTYPES) {
      expect((await tg.tensor([1, 0, 1], { dtype }).toArray()).constructor.name, dtype).toBe(kinds[dtype]);
    }
  });

  it('tolist nests by shape; bool gives booleans; 0-d gives a number', async () => {
    expect(
      await tg
        .tensor([
          [1, 2, 3],
          [4, 5, 6],
        ])
        .tolist(),
    ).toEqual([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    expect(
      await tg
        .tensor([
          [1, 2, 3],
          [4, 5, 6],
        ])
        .T.tolist(),
    ).toEqual([
      [1, 4],
      [2, 5],
      [3, 6],
    ]);
    expect(await tg.tensor([true, false]).tolist()).toEqual([true, false]);
    expect(await tg.tensor(2.5).tolist()).toBe(2.5);
    expect(await tg.zeros([2, 0]).tolist()).toEqual([[], []]);
    expect(await tg.arange(6).reshape(3, 2).tolist()).toEqual([
      [0, 1],
      [2, 3],
      [4, 5],
    ]);
  });

  it('item reads a one-element tensor of any rank and rejects more than one element', async () => {
    expect(await tg.tensor(3.5).item()).toBe(3.5);
    expect(await tg.tensor([[7]], { dtype: 'int32' }).item()).toBe(7);
    expect(await tg.tensor([1, 2, 3]).narrow(0, 2, 1).item()).toBe(3);
    await expect(tg.tensor([1, 2]).item()).rejects.toThrow(/one element.*\[2\]/);
    await expect(tg.zeros([0]).item()).rejects.toThrow(tg.ShapeError);
  });
});

describe.skipIf(!gpu.available)(`moving between devices ${gpu.skipReason}`, () => {
  it('cpu -> webgpu -> cpu keeps every storage code (NaN, -0, subnormals, fp8 NaN) for every dtype', async () => {
    for (const dtype of DTYPES) {
      const x = sourceOf(dtype);
      const g = await x.to('webgpu');
      expect(g.device).toBe('webgpu');
      expect(g.dtype).toBe(dtype);
      const back = await g.to('cpu');
      expect(back.device).toBe('cpu');
      expectClose(await back.toArray(), await x.toArray(), BITS, dtype);
      expectClose(await g.toArray(), await x.toArray(), BITS, `${dtype} read on WebGPU`);
      g.dispose();
    }
  });

  it('reading strided and mid-word GPU views gives the view elements in row-major order', async () => {
    for (const dtype of DTYPES) {
      const x = sourceOf(dtype).narrow(0, 0, 1001).reshape(7, 143);
      const g = await x.to('webgpu');
      for (const view of [
        (t: Tensor) => t.narrow(1, 1, 9),
        (t: Tensor) => t.T,
        (t: Tensor) => t.select(1, 3),
        (t: Tensor) => t.slice(1, 3, undefined, 5),
        (t: Tensor) => t.narrow(0, 2, 1).narrow(1, 5, 1),
      ]) {
        expectClose(await view(g).toArray(), await view(x).toArray(), BITS, dtype);
        const moved = await view(g).to('cpu');
        expectClose(await moved.toArray(), await view(x).toArray(), BITS, `${dtype} to cpu`);
        expect(moved.shape).toEqual(view(x).shape);
      }
      g.dispose();
    }
  });

  it('to() the device a tensor is already on is a view of the same storage', async () => {
    const g = tg.tensor([1, 2], { device: 'webgpu' });
    const same = await g.to('webgpu');
    g.dispose();
    expect(Array.from(await same.toArray())).toEqual([1, 2]);
    const c = tg.tensor([1, 2]);
    expect((await c.to('cpu')).device).toBe('cpu');
  });
});
