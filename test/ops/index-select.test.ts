// indexSelect (torch.index_select) on every dtype, on the CPU backend and on WebGPU, against a gather written here
// over plain JS arrays. Sub-word dtypes (FP8, uint8, bool: 4 a word; f16/bf16: 2) are packed in GPU words, so odd
// sizes and views that start mid-word check that codes are copied whole and unchanged (NaN, -0 and Inf included).
import { describe, expect, it } from 'vitest';
import {
  DeviceMismatchError,
  DTypeError,
  Generator,
  indexSelect,
  setDefaultDevice,
  ShapeError,
  tensor,
  type DeviceName,
  type DType,
  type Tensor,
} from '../../src/index.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { IndexError } from '../../src/core/errors.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const ALL_DTYPES: DType[] = ['float32', 'float16', 'bfloat16', 'float8_e4m3fn', 'float8_e5m2', 'int32', 'uint8', 'bool'];

/** Values exactly representable in dtype (specials included where the dtype has them). */
const POOLS: Record<DType, number[]> = {
  float32: [0, -0, 1.5, -2.25, 3.0000001192092896, 1e-40, -1e30, Infinity, -Infinity, NaN, 65504.5, 0.1],
  float16: [0, -0, 1.5, -2.25, 65504, -65504, 2 ** -24, Infinity, NaN, 0.0999755859375, 1000.5],
  bfloat16: [0, -0, 1.5, -2.25, 3.3895313892515355e38, 2 ** -133, -Infinity, NaN, 0.10009765625, 1000],
  float8_e4m3fn: [0, -0, 1.5, -2.25, 448, -448, 2 ** -9, -(2 ** -9), NaN, 0.1015625, 26],
  float8_e5m2: [0, -0, 1.5, -2.5, 57344, -57344, 2 ** -16, Infinity, -Infinity, NaN, 0.09375],
  int32: [0, 1, -1, 2147483647, -2147483648, 123456789, -7, 42],
  uint8: [0, 1, 2, 127, 128, 200, 254, 255],
  bool: [0, 1],
  int64: [0, 1, -1, 2 ** 40, -(2 ** 53) + 1, 42],
};

function randomValues(n: number, dtype: DType, seed: number): number[] {
  const g = new Generator(seed);
  const pool = POOLS[dtype];
  return Array.from({ length: n }, () => pool[g.nextU32() % pool.length]);
}

/** A row-major JS array with its shape. */
interface Host {
  shape: number[];
  values: number[];
}

const numel = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);
const strides = (shape: readonly number[]) => shape.map((_, d) => numel(shape.slice(d + 1)));

/** host.permute(perm), written out element by element. */
function permuteHost(h: Host, perm: number[]): Host {
  const shape = perm.map((p) => h.shape[p]);
  const src = strides(h.shape);
  const values: number[] = [];
  const idx = new Array(shape.length).fill(0);
  for (let e = 0; e < numel(shape); e++) {
    let rem = e;
    for (let d = shape.length - 1; d >= 0; d--) {
      idx[d] = rem % shape[d];
      rem = Math.floor(rem / shape[d]);
    }
    values.push(h.values[idx.reduce((off, i, d) => off + i * src[perm[d]], 0)]);
  }
  return { shape, values };
}

/** host.narrow(dim, start, length). */
function narrowHost(h: Host, dim: number, start: number, length: number): Host {
  const outer = numel(h.shape.slice(0, dim));
  const inner = numel(h.shape.slice(dim + 1));
  const values: number[] = [];
  for (let o = 0; o < outer; o++)
    for (let i = start; i < start + length; i++) for (let j = 0; j < inner; j++) values.push(h.values[(o * h.shape[dim] + i) * inner + j]);
  const shape = [...h.shape];
  shape[dim] = length;
  return { shape, values };
}

/** The expectation: x.index_select(dim, index) over JS arrays. */
function gather(h: Host, dim: number, index: number[]): Host {
  const d = dim < 0 ? dim + h.shape.length : dim;
  const outer = numel(h.shape.slice(0, d));
  const inner = numel(h.shape.slice(d + 1));
  const values: number[] = [];
  for (let o = 0; o < outer; o++) for (const id of index) for (let j = 0; j < inner; j++) values.push(h.values[(o * h.shape[d] + id) * inner + j]);
  const shape = [...h.shape];
  shape[d] = index.length;
  return { shape, values };
}

/** What toArray gives back for stored values: float dtypes round to float32, bool is 0/1. */
const stored = (dtype: DType, v: number) => (dtype === 'bool' ? (v !== 0 ? 1 : 0) : dtype === 'float32' ? Math.fround(v) : v);

async function expectTensor(label: string, t: Tensor, want: Host, dtype: DType): Promise<void> {
  expect(t.shape, label).toEqual(want.shape);
  expect(t.dtype, label).toBe(dtype);
  const got = Array.from(await t.toArray());
  const exp = want.values.map((v) => stored(dtype, v));
  const bad = exp.map((w, i) => (Object.is(got[i], w) ? '' : `[${i}] got ${got[i]} want ${w}`)).filter(Boolean);
  if (got.length !== exp.length) bad.unshift(`length ${got.length} vs ${exp.length}`);
  if (bad.length) expect.fail(`${label}: ${bad.length} wrong\n  ${bad.slice(0, 6).join('\n  ')}`);
}

interface Case {
  name: string;
  /** The view of the base tensor under test, on the tensor and on the host. */
  view: (t: Tensor) => Tensor;
  hostView: (h: Host) => Host;
}

const CASES: Case[] = [
  { name: 'contiguous', view: (t) => t, hostView: (h) => h },
  { name: 'transposed (0, 2)', view: (t) => t.transpose(0, 2), hostView: (h) => permuteHost(h, [2, 1, 0]) },
  { name: 'permuted (1, 2, 0)', view: (t) => t.permute(1, 2, 0), hostView: (h) => permuteHost(h, [1, 2, 0]) },
  { name: 'narrowed mid-word (dim 2, from 1)', view: (t) => t.narrow(2, 1, 2), hostView: (h) => narrowHost(h, 2, 1, 2) },
  { name: 'narrowed dim 0 from 1 (offset 21 elements)', view: (t) => t.narrow(0, 1, 3), hostView: (h) => narrowHost(h, 0, 1, 3) },
];

/** [dim, index] pairs for a view of shape [a, b, c]. */
function selections(shape: number[]): [number, number[]][] {
  const [a, b, c] = shape;
  return [
    [0, [a - 1, 0, a - 1, 1]],
    [1, [b - 1, 0, Math.floor(b / 2), Math.floor(b / 2), 1, b - 1, 0]],
    [2, [c - 1]],
    [-1, [0, c - 1, 0]],
    [-2, Array.from({ length: b }, (_, i) => b - 1 - i)],
    [1, []],
  ];
}

async function runAll(device: DeviceName, dtype: DType, seed: number): Promise<void> {
  const base: Host = { shape: [5, 7, 3], values: randomValues(105, dtype, seed) };
  const x = tensor(base.values, { shape: base.shape, dtype, device });
  for (const c of CASES) {
    const v = c.view(x);
    const hv = c.hostView(base);
    for (const [dim, index] of selections(hv.shape)) {
      const idx = tensor(index, { dtype: 'int32', device });
      await expectTensor(`${device} ${dtype} ${c.name} dim ${dim} [${index}]`, indexSelect(v, dim, idx), gather(hv, dim, index), dtype);
      if (index.length === 4) await expectTensor(`${device} ${dtype} method`, v.indexSelect(dim, idx), gather(hv, dim, index), dtype);
    }
  }
  // 2-D with odd sizes, selecting single columns (every output word split across source words).
  const flat: Host = { shape: [3, 13], values: randomValues(39, dtype, seed + 1) };
  const y = tensor(flat.values, { shape: flat.shape, dtype, device });
  for (const [dim, index] of [
    [1, [12, 1, 6, 6, 11]],
    [0, [2, 2, 2, 0, 1]],
    [-1, [3]],
    [0, []],
  ] as [number, number[]][]) {
    await expectTensor(`${device} ${dtype} 3x13 dim ${dim}`, indexSelect(y, dim, tensor(index, { dtype: 'int32', device })), gather(flat, dim, index), dtype);
  }
  // 1-D source.
  const one: Host = { shape: [9], values: randomValues(9, dtype, seed + 2) };
  const z = tensor(one.values, { shape: [9], dtype, device });
  await expectTensor(`${device} ${dtype} 1-D`, indexSelect(z, 0, tensor([8, 0, 4, 4, 7], { dtype: 'int32', device })), gather(one, 0, [8, 0, 4, 4, 7]), dtype);
}

describe('indexSelect on the CPU backend', () => {
  it.each(ALL_DTYPES)('%s: dims 0/1/last/negative, repeated and empty indices, strided and offset views', async (dtype) => {
    await runAll('cpu', dtype, ALL_DTYPES.indexOf(dtype) * 10 + 1);
  });

  it('index views: a strided index (every other element) and one with an offset; a 0-d index keeps the dim', async () => {
    const base: Host = { shape: [4, 6], values: randomValues(24, 'float8_e4m3fn', 5) };
    const x = tensor(base.values, { shape: base.shape, dtype: 'float8_e4m3fn' });
    const idx = tensor([5, 9, 0, 9, 3, 9, 3], { dtype: 'int32' });
    await expectTensor('strided index', indexSelect(x, 1, idx.slice(0, 0, 7, 2)), gather(base, 1, [5, 0, 3, 3]), 'float8_e4m3fn');
    await expectTensor('offset index', indexSelect(x, 0, tensor([9, 9, 3, 1], { dtype: 'int32' }).narrow(0, 2, 2)), gather(base, 0, [3, 1]), 'float8_e4m3fn');
    // torch.index_select with a 0-d index: the dim stays, with size 1.
    await expectTensor('0-d index', indexSelect(x, 1, tensor(4, { dtype: 'int32' })), gather(base, 1, [4]), 'float8_e4m3fn');
  });

  it('an out-of-range or negative index throws ShapeError naming it', () => {
    const x = tensor([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    expect(() => indexSelect(x, 1, tensor([0, 3], { dtype: 'int32' }))).toThrow(ShapeError);
    expect(() => indexSelect(x, 1, tensor([0, 3], { dtype: 'int32' }))).toThrow(/index 3 is out of range for dim 1 of size 3/);
    expect(() => indexSelect(x, 0, tensor([-1], { dtype: 'int32' }))).toThrow(/index -1/);
  });

  it('argument errors: non-int32 index (DTypeError), 2-D index, 0-d source, bad dim (ShapeError)', () => {
    const x = tensor([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    for (const dtype of ['float32', 'uint8', 'bool', 'float8_e4m3fn', 'float16'] as const) {
      expect(() => indexSelect(x, 0, tensor([0, 1], { dtype }))).toThrow(DTypeError);
      expect(() => indexSelect(x, 0, tensor([0, 1], { dtype }))).toThrow(new RegExp(`index must be int32, got \\[2\\] ${dtype}`));
    }
    expect(() => indexSelect(x, 0, tensor([[0, 1]], { dtype: 'int32' }))).toThrow(ShapeError);
    expect(() => indexSelect(x, 0, tensor([[0, 1]], { dtype: 'int32' }))).toThrow(/\[1, 2\] int32/);
    expect(() => indexSelect(tensor(3), 0, tensor([0], { dtype: 'int32' }))).toThrow(ShapeError);
    expect(() => indexSelect(x, 2, tensor([0], { dtype: 'int32' }))).toThrow(ShapeError);
    expect(() => indexSelect(x, -3, tensor([0], { dtype: 'int32' }))).toThrow(ShapeError);
  });
});

describe.skipIf(!gpu.available)(`indexSelect on WebGPU ${gpu.skipReason}`, () => {
  it.each(ALL_DTYPES)('%s: dims 0/1/last/negative, repeated and empty indices, strided and offset views', async (dtype) => {
    await runAll('webgpu', dtype, ALL_DTYPES.indexOf(dtype) * 10 + 1);
  });

  it('index views: strided, offset and 0-d indices', async () => {
    const base: Host = { shape: [4, 6], values: randomValues(24, 'bfloat16', 5) };
    const x = tensor(base.values, { shape: base.shape, dtype: 'bfloat16', device: 'webgpu' });
    const idx = tensor([5, 9, 0, 9, 3, 9, 3], { dtype: 'int32', device: 'webgpu' });
    await expectTensor('strided index', indexSelect(x, 1, idx.slice(0, 0, 7, 2)), gather(base, 1, [5, 0, 3, 3]), 'bfloat16');
    await expectTensor(
      'offset index',
      indexSelect(x, 0, tensor([9, 9, 3, 1], { dtype: 'int32', device: 'webgpu' }).narrow(0, 2, 2)),
      gather(base, 0, [3, 1]),
      'bfloat16',
    );
    await expectTensor('0-d index', indexSelect(x, 1, tensor(4, { dtype: 'int32', device: 'webgpu' })), gather(base, 1, [4]), 'bfloat16');
  });

  it('a larger gather (embedding lookup: 1000 x 130 FP8 table, 300 token ids) equals the CPU', async () => {
    const table: Host = { shape: [1000, 130], values: randomValues(130000, 'float8_e4m3fn', 9) };
    const g = new Generator(10);
    const ids = Array.from({ length: 300 }, () => g.nextU32() % 1000);
    const want = gather(table, 0, ids);
    const onGpu = indexSelect(
      tensor(table.values, { shape: table.shape, dtype: 'float8_e4m3fn', device: 'webgpu' }),
      0,
      tensor(ids, { dtype: 'int32', device: 'webgpu' }),
    );
    await expectTensor('webgpu embedding', onGpu, want, 'float8_e4m3fn');
    const onCpu = indexSelect(tensor(table.values, { shape: table.shape, dtype: 'float8_e4m3fn' }), 0, tensor(ids, { dtype: 'int32' }));
    await expectTensor('cpu embedding', onCpu, want, 'float8_e4m3fn');
  });

  it('an out-of-range or negative index raises an IndexError on both backends (WebGPU: at the next read)', async () => {
    for (const dtype of ['float32', 'float16', 'float8_e4m3fn', 'uint8', 'bool'] as const) {
      const base: Host = { shape: [2, 5], values: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1] };
      const x = tensor(base.values, { shape: base.shape, dtype, device: 'webgpu' });
      const out = indexSelect(x, 1, tensor([4, 5, -1, 0, 1000], { dtype: 'int32', device: 'webgpu' }));
      expect(out.shape).toEqual([2, 5]);
      await expect(out.toArray(), dtype).rejects.toThrow(IndexError);
      // The flag was cleared by that read: the next read of good work succeeds.
      expect(Array.from(await x.toArray())).toEqual(base.values);
      const onCpu = tensor(base.values, { shape: base.shape, dtype });
      expect(() => indexSelect(onCpu, 1, tensor([4, 5, -1, 0, 1000], { dtype: 'int32' }))).toThrow(IndexError);
    }
  });

  it('non-int32 index: DTypeError; index on another device: DeviceMismatchError', async () => {
    const x = tensor([[1, 2, 3]], { device: 'webgpu' });
    expect(() => indexSelect(x, 1, tensor([0], { device: 'webgpu' }))).toThrow(DTypeError);
    expect(() => indexSelect(x, 1, tensor([0], { dtype: 'int32' }))).toThrow(DeviceMismatchError);
    expect(() => indexSelect(x, 1, tensor([0], { dtype: 'int32' }))).toThrow(/webgpu.*cpu/);
  });
});
