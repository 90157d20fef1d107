// indexSelect's backward through Backend.indexAdd (the deterministic scatter-add of an embedding's gradient):
// WebGPU against the CPU on fresh random gradients, with repeated indices (more than a workgroup of them, all equal,
// along every dim), bfloat16 tables, gradients arriving as strided and broadcast views, an empty index and
// out-of-range indices on WebGPU; a fixed summation order (bit-equal to a float32 sum in index order, run after
// run); the CPU gradient against central differences; and the dispatches (no one-hot matmul).
import { describe, expect, it } from 'vitest';
import { Generator, gpuCounters, indexSelect, noGrad, setDefaultDevice, synchronize, tensor, type DType, type Tensor } from '../../src/index.js';
import { BITS, expectClose, randomTensor } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

type Device = 'cpu' | 'webgpu';

function randomIds(n: number, size: number, seed: number): number[] {
  const g = new Generator(seed);
  return Array.from({ length: n }, () => g.nextU32() % size);
}

/**
 * d/dx of sum(after(indexSelect(x, dim, ids)) * r) on one device: x a copy of `table`, r a CPU tensor of the
 * result's shape (undefined: a plain sum, whose gradient arrives as a broadcast view).
 */
async function gradOf(
  device: Device,
  table: Tensor,
  dim: number,
  ids: number[],
  r: Tensor | undefined,
  after: (t: Tensor) => Tensor = (t) => t,
): Promise<{ grad: Float32Array | Int32Array | Uint8Array; dtype: DType }> {
  const x = (device === 'cpu' ? table.clone() : await table.to('webgpu')).requiresGrad_();
  const idx = tensor(ids, { dtype: 'int32', device });
  const rd = r && (await r.to(device));
  const y = after(indexSelect(x, dim, idx));
  const loss = rd ? y.mul(rd).sum() : y.sum();
  loss.backward();
  const out = { grad: await x.grad!.toArray(), dtype: x.grad!.dtype };
  [loss, y, idx, rd].forEach((t) => t?.dispose());
  x.zeroGrad();
  x.dispose();
  return out;
}

async function compareDevices(
  label: string,
  table: Tensor,
  dim: number,
  ids: number[],
  opts: { after?: (t: Tensor) => Tensor; plainSum?: boolean } = {},
): Promise<Float32Array | Int32Array | Uint8Array> {
  const yShape = [...table.shape];
  yShape[dim < 0 ? dim + table.ndim : dim] = ids.length;
  const probe = noGrad(() => (opts.after ?? ((t: Tensor) => t))(tensor(new Array(yShape.reduce((a, b) => a * b, 1)).fill(1), { shape: yShape })));
  const r = opts.plainSum ? undefined : randomTensor(probe.shape, 'float32');
  probe.dispose();
  const want = await gradOf('cpu', table, dim, ids, r, opts.after);
  const got = await gradOf('webgpu', table, dim, ids, r, opts.after);
  r?.dispose();
  expect(got.dtype, `${label}: grad dtype`).toBe(table.dtype);
  // float32 sums in index order against float64 ones; bfloat16 tables round both to one bf16 value or a neighbour.
  expectClose(got.grad, want.grad, table.dtype === 'float32' ? { atol: 1e-5, rtol: 1e-5 } : { atol: 1e-5, rtol: 8e-3 }, label);
  return want.grad;
}

describe.skipIf(!gpu.available)(`indexSelect backward (indexAdd) on WebGPU equals the CPU ${gpu.skipReason}`, () => {
  it('an embedding: repeated ids, more ids than a workgroup, rows not a multiple of anything', async () => {
    const table = randomTensor([50, 33], 'float32');
    await compareDevices('700 ids into 50 rows', table, 0, randomIds(700, 50, 1));
    await compareDevices('3 ids', table, 0, [7, 7, 2]);
    // Rows no id points at get zeros.
    const grad = await compareDevices('ids 0..9 of 50', table, 0, randomIds(300, 10, 2));
    expect(Array.from(grad.slice(10 * 33)).every((g) => g === 0)).toBe(true);
    table.dispose();
  });

  it('along dim 1, the last dim (-1) and a 4-D tensor; a bfloat16 table (gradient back in bfloat16)', async () => {
    const x3 = randomTensor([3, 40, 5], 'float32');
    await compareDevices('dim 1', x3, 1, randomIds(333, 40, 3));
    await compareDevices('dim -1', x3, -1, randomIds(17, 5, 4));
    x3.dispose();
    const x4 = randomTensor([2, 3, 7, 4], 'float32');
    await compareDevices('4-D dim 2', x4, 2, [6, 0, 6, 6, 1, 0]);
    x4.dispose();
    const bf = randomTensor([64, 24], 'bfloat16');
    await compareDevices('bfloat16 table', bf, 0, randomIds(500, 64, 5));
    bf.dispose();
  });

  it('gradients arriving as strided and broadcast views (read in place)', async () => {
    const table = randomTensor([30, 6], 'float32');
    await compareDevices('transposed gradient', table, 0, randomIds(90, 30, 6), { after: (t) => t.transpose(0, 1) });
    await compareDevices('broadcast gradient of a plain sum', table, 0, randomIds(90, 30, 7), { plainSum: true });
    table.dispose();
  });

  it('an empty index gives a zero gradient; out-of-range ids on WebGPU raise an IndexError', async () => {
    const table = randomTensor([8, 5], 'float32');
    for (const device of ['cpu', 'webgpu'] as const) {
      const g = await gradOf(device, table, 0, [], undefined);
      expect(Array.from(g.grad), `${device} empty index`).toEqual(new Array(40).fill(0));
    }
    // Out-of-range ids raise at the next read back (never a silent zero), and the device keeps working after.
    const x = await table.to('webgpu');
    const y = indexSelect(x, 0, tensor([3, -1, 3, 8, 1000, 0], { dtype: 'int32', device: 'webgpu' }));
    await expect(y.toArray()).rejects.toThrow(/indexSelect: index (-1|8|1000) is out of range for a dim of size 8/);
    [x, y].forEach((t) => t.dispose());
    const r = randomTensor([3, 5], 'float32');
    const got = await gradOf('webgpu', table, 0, [3, 3, 0], r);
    const want = await gradOf('cpu', table, 0, [3, 3, 0], r);
    expectClose(got.grad, want.grad, { atol: 1e-6, rtol: 1e-6 }, 'ids after an error');
    [table, r].forEach((t) => t.dispose());
  });

  it('sums in index order, run after run: bit-equal to a float32 sum in that order', async () => {
    // 1000 ids all pointing at row 1 and 300 at row 0, interleaved: long chains, one order.
    const ids = Array.from({ length: 1300 }, (_, i) => (i % 13 < 3 ? 0 : 1));
    const r = randomTensor([1300, 4], 'float32', 'normal', 100);
    const rv = await r.toArray();
    const want = new Float32Array(3 * 4);
    for (let i = 0; i < ids.length; i++) for (let c = 0; c < 4; c++) want[ids[i] * 4 + c] = Math.fround(want[ids[i] * 4 + c] + rv[i * 4 + c]);
    const table = randomTensor([3, 4], 'float32');
    const first = await gradOf('webgpu', table, 0, ids, r);
    const second = await gradOf('webgpu', table, 0, ids, r);
    expectClose(first.grad, want, BITS, 'index-order float32 sum');
    expectClose(second.grad, first.grad, BITS, 'the same bits again');
    [table, r].forEach((t) => t.dispose());
  });

  it('three dispatches (chain heads, chains, sums), no one-hot matmul', async () => {
    const x = (await randomTensor([100, 64], 'float32').to('webgpu')).requiresGrad_();
    const idx = tensor(randomIds(77, 100, 8), { dtype: 'int32', device: 'webgpu' });
    const r = await randomTensor([77, 64], 'float32').to('webgpu');
    for (let k = 0; k < 2; k++) {
      const y = indexSelect(x, 0, idx).mul(r);
      await synchronize();
      const before = gpuCounters();
      // The rule alone: y's gradient is r, given as the seed.
      y.backward(r);
      const after = gpuCounters();
      if (k === 1) {
        const by = (name: string) => (after.byKernel[name] ?? 0) - (before.byKernel[name] ?? 0);
        expect(by('index_add_chain')).toBe(1);
        expect(by('index_add')).toBe(1);
        expect(by('gemm') + by('gemv')).toBe(0);
      }
      y.dispose();
      x.zeroGrad();
    }
    [x, idx, r].forEach((t) => t.dispose());
  });
});

describe('indexSelect backward on the CPU', () => {
  /** d/dx of sum(indexSelect(x, dim, ids) * r) against central differences. */
  async function gradcheck(label: string, shape: number[], dim: number, ids: number[]): Promise<void> {
    const x0 = randomTensor(shape, 'float32');
    const idx = tensor(ids, { dtype: 'int32' });
    const y0 = indexSelect(x0, dim, idx);
    const r = randomTensor(y0.shape, 'float32');
    y0.dispose();
    const f = (x: Tensor) => indexSelect(x, dim, idx).mul(r).sum();
    const leaf = x0.detach().requiresGrad_();
    f(leaf).backward();
    const base = Array.from(await x0.toArray());
    const eps = 1e-2;
    const numeric = base.map(() => 0);
    for (let i = 0; i < base.length; i++) {
      const at = async (delta: number) => {
        const v = base.slice();
        v[i] += delta;
        return noGrad(() => f(tensor(v, { shape }))).item();
      };
      numeric[i] = ((await at(eps)) - (await at(-eps))) / (2 * eps);
    }
    expectClose(await leaf.grad!.toArray(), numeric, { atol: 2e-3, rtol: 1e-2 }, label);
    leaf.zeroGrad();
    [x0, idx, r].forEach((t) => t.dispose());
  }

  it('the gradient equals central differences along every dim, with repeated ids', async () => {
    await gradcheck('dim 0', [4, 3], 0, [2, 0, 2, 3, 2]);
    await gradcheck('dim 1', [2, 3, 2], 1, [1, 1, 0]);
    await gradcheck('dim 2', [2, 2, 3], 2, [2, 2, 2, 0]);
  });
});
