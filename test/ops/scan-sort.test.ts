// cumsum, sort and topk: WebGPU against the CPU backend on fresh random inputs (odd sizes, rows past a workgroup's
// chunk and a workgroup's sort block, long rows, ties, NaN / Inf, empty, several dims, strided views, narrow
// floats), torch's semantics on the CPU from hand-written cases, and gradients against central differences.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice, ShapeError, tensor, type Tensor } from '../../src/index.js';
import { BITS, checkBoth, EXACT, expectClose, randomTensor, randomValues, tolerance, type Tolerance } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { gradcheck } from '../helpers/gradcheck.js';
import { sortTuning } from '../../src/kernels/sort/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

/** Running sums in float32 (GPU, a tree per chunk) vs float64 (CPU): the error grows with the partial sums' size. */
const scanTol = (len: number): Tolerance => ({ atol: 2e-6 * Math.sqrt(len) + 1e-5, rtol: 1e-5 });

/** One output of a sort / topk, the other disposed. */
const indicesOf = (r: tg.SortResult): Tensor => (r.values.dispose(), r.indices);
const valuesOf = (r: tg.SortResult): Tensor => (r.indices.dispose(), r.values);

/** A float tensor with NaN, +-Inf and -0 planted among random values (a fixed pattern, so both devices see it). */
function withSpecials(shape: readonly number[], dist: 'normal' | 'coarse' = 'normal'): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  const v = randomValues(n, 'float32', dist);
  const specials = [NaN, Infinity, -Infinity, -0, 0, NaN];
  for (let i = 0; i < n; i += 7) v[i] = specials[(i / 7) % specials.length];
  return tensor(v, { shape });
}

async function checkSort(x: Tensor, label: string, dims: number[] = [-1]): Promise<void> {
  for (const dim of dims) {
    for (const descending of [false, true]) {
      const l = `${label} dim ${dim} ${descending ? 'desc' : 'asc'}`;
      await checkBoth([x], (t) => indicesOf(tg.sort(t, { dim, descending })), EXACT, `${l} indices`);
      await checkBoth([x], (t) => valuesOf(tg.sort(t, { dim, descending })), BITS, `${l} values`);
    }
  }
}

describe.skipIf(!gpu.available)('cumsum: WebGPU vs CPU', () => {
  it('several dims, odd sizes, rows past a chunk, strided views', async () => {
    for (const shape of [
      [3, 5, 7],
      [2, 1031],
      [1100, 3],
      [1, 1],
      [4, 65],
    ]) {
      const x = randomTensor(shape, 'float32');
      for (let dim = -1; dim < shape.length; dim++) {
        const len = shape[dim < 0 ? shape.length + dim : dim];
        await checkBoth([x], (t) => tg.cumsum(t, dim), scanTol(len), `cumsum ${JSON.stringify(shape)} dim ${dim}`);
      }
      x.dispose();
    }
    const x = randomTensor([70, 6, 5], 'float32');
    await checkBoth([x], (t) => tg.cumsum(t.transpose(0, 2), 2), scanTol(70), 'cumsum of a transposed view (long strided rows)');
    await checkBoth([x], (t) => tg.cumsum(t.narrow(1, 1, 4).transpose(0, 1), 0), scanTol(4), 'cumsum of a narrowed, transposed view');
    x.dispose();
  });
  it('a long row (70000), NaN / Inf, empty tensors', async () => {
    const long = randomTensor([2, 70000], 'float32');
    await checkBoth([long], (t) => tg.cumsum(t, 1), scanTol(70000), 'cumsum of 70000');
    long.dispose();
    const s = withSpecials([3, 300]);
    await checkBoth([s], (t) => tg.cumsum(t, 1), scanTol(300), 'cumsum with NaN / Inf');
    s.dispose();
    for (const shape of [
      [3, 0],
      [0, 4],
    ]) {
      const e = tg.zeros(shape);
      await checkBoth([e], (t) => tg.cumsum(t, 1), EXACT, `cumsum of empty ${JSON.stringify(shape)}`);
      await checkBoth([e], (t) => tg.cumsum(t, 0), EXACT, `cumsum of empty ${JSON.stringify(shape)} dim 0`);
      e.dispose();
    }
  });
  it('int32, uint8 and bool sum exactly into int64 (int32 with that dtype); float16 / bfloat16 round once', async () => {
    for (const dtype of ['int32', 'uint8', 'bool'] as const) {
      const x = randomTensor([5, 333], dtype);
      const r = await checkBoth([x], (t) => tg.cumsum(t, 1), EXACT, `cumsum ${dtype}`);
      expect(r.dtype).toBe('int64');
      await checkBoth([x], (t) => tg.cumsum(t, 0), EXACT, `cumsum ${dtype} dim 0`);
      expect((await checkBoth([x], (t) => tg.cumsum(t, 1, { dtype: 'int32' }), EXACT, `cumsum ${dtype} as int32`)).dtype).toBe('int32');
      x.dispose();
    }
    for (const dtype of ['float16', 'bfloat16'] as const) {
      const x = randomTensor([4, 77], dtype);
      const r = await checkBoth([x], (t) => tg.cumsum(t, 1), tolerance(dtype, 'accumulate'), `cumsum ${dtype}`);
      expect(r.dtype).toBe(dtype);
      x.dispose();
    }
    const i = randomTensor([3, 100], 'int32');
    await checkBoth([i], (t) => tg.cumsum(t, 1, { dtype: 'float32' }), scanTol(100), 'cumsum int32 with dtype float32');
    i.dispose();
  });
});

describe.skipIf(!gpu.available)('sort and topk: WebGPU vs CPU', () => {
  it('short rows in one workgroup: several dims, odd sizes, ties, NaN / Inf, strided', async () => {
    const x = randomTensor([5, 7, 9], 'float32');
    await checkSort(x, '[5,7,9]', [0, 1, 2]);
    await checkBoth([x], (t) => indicesOf(tg.sort(t.transpose(0, 2), { dim: 1 })), EXACT, 'sort of a transposed view');
    x.dispose();
    const ties = randomTensor([6, 300], 'float32', 'coarse');
    await checkSort(ties, 'ties', [-1, 0]);
    ties.dispose();
    const s = withSpecials([4, 53], 'coarse');
    await checkSort(s, 'NaN / Inf / -0');
    s.dispose();
    const one = randomTensor([3, 2048], 'float32', 'coarse');
    await checkSort(one, 'one full block');
    one.dispose();
  });
  it('dtypes: int32, uint8, bool, float16, bfloat16', async () => {
    for (const dtype of ['int32', 'uint8', 'bool', 'float16', 'bfloat16'] as const) {
      const x = randomTensor([3, 41], dtype);
      await checkSort(x, dtype);
      x.dispose();
    }
  });
  it('rows past a block: the global merge steps', async () => {
    const x = withSpecials([3, 5000], 'coarse');
    await checkSort(x, '[3,5000]');
    x.dispose();
    const t = randomTensor([4099, 2], 'float32', 'coarse');
    await checkSort(t, '[4099,2] dim 0', [0]);
    t.dispose();
  });
  it('forced paths: tiny blocks (many global steps), and a pair per invocation (as on GPUs: 256 invocations)', async () => {
    const x = withSpecials([3, 300], 'coarse');
    try {
      sortTuning.block = 16;
      await checkSort(x, 'blocks of 16');
      // Blocks of 2048 (the GPU policy's) compile for seconds on SwiftShader: 512 with 256 invocations takes the
      // same code path.
      Object.assign(sortTuning, { block: 512, maxWorkgroupSize: 256 });
      const y = randomTensor([2, 1100], 'float32', 'coarse');
      await checkBoth([y], (t) => indicesOf(tg.sort(t)), EXACT, 'blocks of 512, 256 invocations');
      await checkBoth([y], (t) => indicesOf(tg.topk(t, 9, { largest: false })), EXACT, 'blocks of 512, 256 invocations, topk');
      y.dispose();
    } finally {
      Object.assign(sortTuning, { block: undefined, maxWorkgroupSize: undefined });
      x.dispose();
    }
  });
  it('a long row (70000) and topk of an LLM vocabulary (128256, k 50)', async () => {
    const x = randomTensor([1, 70000], 'float32', 'coarse');
    await checkBoth([x], (t) => indicesOf(tg.sort(t, { descending: true })), EXACT, 'sort 70000');
    x.dispose();
    // One run a device, indices and values both checked (each sort of a long row costs seconds on SwiftShader).
    const logits = randomTensor([2, 128256], 'float32');
    const onGpu = await logits.to('webgpu');
    const want = tg.topk(logits, 50);
    const got = tg.topk(onGpu, 50);
    expect(got.indices.shape).toEqual([2, 50]);
    expect(await got.indices.tolist()).toEqual(await want.indices.tolist());
    expectClose(await got.values.toArray(), await want.values.toArray(), BITS, 'topk 50 values');
    for (const t of [logits, onGpu, want.values, want.indices, got.values, got.indices]) t.dispose();
  });
  it('topk: several k and dims, NaN, empty tensors', async () => {
    const x = withSpecials([6, 37], 'coarse');
    for (const k of [0, 1, 5, 37]) {
      for (const dim of [-1, 0]) {
        if (k > x.shape[dim < 0 ? 1 : 0]) continue;
        await checkBoth([x], (t) => indicesOf(tg.topk(t, k, { dim })), EXACT, `topk k ${k} dim ${dim}`);
        await checkBoth([x], (t) => valuesOf(tg.topk(t, k, { dim, largest: false })), BITS, `topk smallest k ${k} dim ${dim}`);
      }
    }
    x.dispose();
    const e = tg.zeros([3, 0]);
    await checkBoth([e], (t) => indicesOf(tg.sort(t)), EXACT, 'sort of empty rows');
    await checkBoth([e], (t) => valuesOf(tg.topk(t, 0)), EXACT, 'topk 0 of empty rows');
    await checkBoth([e], (t) => indicesOf(tg.sort(t, { dim: 0 })), EXACT, 'sort of no rows');
    e.dispose();
  });
});

describe('cumsum, sort and topk: torch semantics on the CPU', () => {
  it('cumsum: values, dims, dtypes, 0-d', async () => {
    const x = tensor([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    expect(Array.from(await tg.cumsum(x, 1).toArray())).toEqual([1, 3, 6, 4, 9, 15]);
    expect(Array.from(await x.cumsum(0).toArray())).toEqual([1, 2, 3, 5, 7, 9]);
    expect(Array.from(await tg.cumsum(x, -1, { dtype: 'int32' }).toArray())).toEqual([1, 3, 6, 4, 9, 15]);
    const b = tensor([1, 0, 1, 1], { dtype: 'bool' });
    const cb = tg.cumsum(b, 0);
    expect(cb.dtype).toBe('int64');
    expect(await cb.tolist()).toEqual([1, 1, 2, 3]);
    expect(tg.cumsum(tensor([1, 2], { dtype: 'int32' }), 0).dtype).toBe('int64');
    expect(tg.cumsum(b, 0, { dtype: 'int32' }).dtype).toBe('int32');
    const h = tg.cumsum(tensor([1, 2048, 1], { dtype: 'float16' }), 0);
    expect(h.dtype).toBe('float16');
    // Accumulated in float32 and rounded once: 2049 rounds to 2048 in float16, 2050 is exact.
    expect(Array.from(await h.toArray())).toEqual([1, 2048, 2050]);
    const s = tg.cumsum(tensor(3), 0);
    expect(s.shape).toEqual([]);
    expect(await s.item()).toBe(3);
    expect(Array.from(await tg.cumsum(tensor([1, NaN, 2, Infinity]), 0).toArray())).toEqual([1, NaN, NaN, NaN]);
    expect(() => tg.cumsum(x, 2)).toThrow();
    expect(() => tg.cumsum(tensor([1], { dtype: 'float8_e4m3fn' }), 0)).toThrow(tg.DTypeError);
  });
  it('sort: NaN last ascending, first descending; -0 equals +0; stable ties', async () => {
    const x = tensor([3, NaN, 1, -0, 0, 1]);
    const a = tg.sort(x);
    expect(await a.indices.tolist()).toEqual([3, 4, 2, 5, 0, 1]);
    expect(Array.from(await a.values.toArray())).toEqual([-0, 0, 1, 1, 3, NaN]);
    expect(a.indices.dtype).toBe('int64');
    const d = x.sort({ descending: true });
    expect(await d.indices.tolist()).toEqual([1, 0, 2, 5, 3, 4]);
    expect(Array.from(await d.values.toArray())).toEqual([NaN, 3, 1, 1, -0, 0]);
    const m = tensor([
      [2, 1],
      [1, 1],
      [0, 5],
    ]);
    const c = tg.sort(m, { dim: 0 });
    expect(await c.indices.tolist()).toEqual([
      [2, 0],
      [1, 1],
      [0, 2],
    ]);
    expect(Array.from(await c.values.toArray())).toEqual([0, 1, 1, 1, 2, 5]);
    const z = tg.sort(tensor(4));
    expect(z.values.shape).toEqual([]);
    expect(await z.indices.item()).toBe(0);
    const e = tg.sort(tg.zeros([2, 0]));
    expect(e.values.shape).toEqual([2, 0]);
  });
  it('topk: largest picks NaN first, smallest, ties by index, k checks', async () => {
    const x = tensor([3, NaN, 1, -0, 0, 1]);
    const t = tg.topk(x, 3);
    expect(Array.from(await t.values.toArray())).toEqual([NaN, 3, 1]);
    expect(await t.indices.tolist()).toEqual([1, 0, 2]);
    const s = x.topk(2, { largest: false });
    expect(Array.from(await s.values.toArray())).toEqual([-0, 0]);
    expect(await s.indices.tolist()).toEqual([3, 4]);
    const m = tensor([
      [1, 9, 4],
      [7, 2, 8],
    ]);
    const c = tg.topk(m, 1, { dim: 0 });
    expect(c.values.shape).toEqual([1, 3]);
    expect(await c.indices.tolist()).toEqual([[1, 0, 1]]);
    expect(() => tg.topk(m, 4)).toThrow(ShapeError);
    expect(() => tg.topk(m, 4)).toThrow(/k \(4\).*dim -1 of size 3/);
    expect(() => tg.topk(m, 3, { dim: 0 })).toThrow(/dim 0 of size 2/);
    expect(() => tg.topk(m, -1)).toThrow(ShapeError);
    expect(tg.topk(m, 0).values.shape).toEqual([2, 0]);
    expect(tg.topk(tg.zeros([0, 5]), 2).indices.shape).toEqual([0, 2]);
  });
});

describe('cumsum, sort and topk: gradients against central differences', () => {
  it('cumsum along each dim', async () => {
    const x = randomTensor([3, 5], 'float32');
    await gradcheck('cumsum dim 1', (t) => tg.cumsum(t, 1), [x]);
    await gradcheck('cumsum dim 0', (t) => tg.cumsum(t, 0), [x]);
    await gradcheck('cumsum of a transposed view', (t) => tg.cumsum(t.transpose(0, 1), 1), [x]);
    x.dispose();
  });
  it('sort and topk values scatter back to their indices', async () => {
    // Values a step apart: central differences never reorder them.
    const x = tensor([0.3, -1.2, 2.5, 0.9, -0.4, 1.7, -2.1, 3.3, 0.0, 1.1, -3.0, 2.0], { shape: [3, 4] });
    await gradcheck('sort values', (t) => tg.sort(t).values, [x]);
    await gradcheck('sort values dim 0 descending', (t) => tg.sort(t, { dim: 0, descending: true }).values, [x]);
    await gradcheck('topk values', (t) => tg.topk(t, 2).values, [x]);
    await gradcheck('topk smallest dim 0', (t) => tg.topk(t, 2, { dim: 0, largest: false }).values, [x]);
    x.dispose();
  });
});
