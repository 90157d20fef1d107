// torch.matmul of integer tensors (int32, uint8, int64): exact products summed in the promoted dtype, the same on
// both backends and equal to a hand-computed reference; 1-D operands and broadcast batch dims as torch.matmul.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { tensor, type Tensor } from '../../src/index.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
const devices = ['cpu', ...(gpu.available ? ['webgpu' as const] : [])] as const;

/** Row-major integer reference of [..batch, m, k] @ [k, n] (one batch of b). */
function reference(a: number[], b: number[], batch: number, m: number, k: number, n: number): number[] {
  const out: number[] = [];
  for (let p = 0; p < batch; p++)
    for (let i = 0; i < m; i++)
      for (let j = 0; j < n; j++) {
        let s = 0;
        for (let q = 0; q < k; q++) s += a[p * m * k + i * k + q]! * b[q * n + j]!;
        out.push(s);
      }
  return out;
}

function randomInts(n: number, lo: number, hi: number, seed: number): number[] {
  let x = seed >>> 0;
  return Array.from({ length: n }, () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    return lo + (x % (hi - lo + 1));
  });
}

describe.each(devices)('integer matmul on %s', (device) => {
  it('int32 [2, 3, 5] @ [5, 7] (batch broadcast), odd sizes, negative values: exact', async () => {
    const a = randomInts(2 * 3 * 5, -1000, 1000, 1);
    const b = randomInts(5 * 7, -1000, 1000, 2);
    const x = tensor(a, { shape: [2, 3, 5], dtype: 'int32', device });
    const y = tensor(b, { shape: [5, 7], dtype: 'int32', device });
    const z = tg.matmul(x, y);
    expect(z.dtype).toBe('int32');
    expect(z.shape).toEqual([2, 3, 7]);
    expect(Array.from(await z.toArray())).toEqual(reference(a, b, 2, 3, 5, 7));
    for (const t of [x, y, z]) t.dispose();
  });

  it('1-D operands: vector @ matrix, matrix @ vector, vector @ vector (0-d); uint8 @ int32 promotes to int32', async () => {
    const v = tensor([1, 2, 3], { dtype: 'int32', device });
    const m = tensor([1, 2, 3, 4, 5, 6], { shape: [3, 2], dtype: 'uint8', device });
    const vm = tg.matmul(v, m);
    expect(vm.dtype).toBe('int32');
    expect(await vm.tolist()).toEqual([22, 28]);
    const mv = tg.matmul(tensor([1, 2, 3, 4, 5, 6], { shape: [2, 3], dtype: 'int32', device }), v);
    expect(await mv.tolist()).toEqual([14, 32]);
    const vv = tg.matmul(v, v);
    expect(vv.shape).toEqual([]);
    expect(await vv.item()).toBe(14);
    for (const t of [v, m, vm, mv, vv] as Tensor[]) t.dispose();
  });

  it('int64 beyond 2^32 stays exact; inner dims that differ are a ShapeError', async () => {
    const x = tensor(BigInt64Array.of(3_000_000_000n, 2n), { shape: [1, 2], device });
    const y = tensor(BigInt64Array.of(5n, 7n), { shape: [2, 1], device });
    const z = tg.matmul(x, y);
    expect(z.dtype).toBe('int64');
    expect(Array.from(await tg.toBigInt64Array(z))).toEqual([15_000_000_014n]);
    expect(() => tg.matmul(tensor([1, 2], { dtype: 'int32', device }), tensor([1, 2, 3], { dtype: 'int32', device }))).toThrow(tg.ShapeError);
    for (const t of [x, y, z]) t.dispose();
  });
});
