// matmul on WebGPU against the CPU backend: shapes that fill no tile evenly, long K (f32 accumulation), 1-D
// operands, batched with broadcasting, transposed and offset operands (strided views, no copy), K = 0, f16/bf16.
// Work per case stays well under 1e8 multiply-adds so the software adapter keeps up.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice, type DType, type Tensor } from '../../src/index.js';
import { checkBoth, expectClose, randomTensor, tolerance, type Tolerance } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

/** f32 dot products of length k: rounding grows ~sqrt(k); the output dtype's rounding comes on top. */
function mmTol(dtype: DType, k: number): Tolerance {
  const t = tolerance(dtype, 'accumulate');
  return { atol: t.atol + 2e-6 * Math.sqrt(Math.max(k, 1)), rtol: t.rtol };
}

const mm = (a: Tensor, b: Tensor) => a.matmul(b);

describe.skipIf(!gpu.available)(`matmul, WebGPU vs CPU ${gpu.skipReason}`, () => {
  // [m, k, n]
  const shapes: [number, number, number][] = [
    [1, 1, 1],
    [3, 5, 7],
    [64, 64, 64],
    [65, 129, 33],
    [17, 4097, 9],
    [257, 17, 4097],
    [2, 3, 4097],
  ];
  it.each(shapes)('[%i x %i] @ [k x %i], float32', async (m, k, n) => {
    const r = await checkBoth([randomTensor([m, k]), randomTensor([k, n])], mm, mmTol('float32', k));
    expect(r.shape).toEqual([m, n]);
    expect(r.dtype).toBe('float32');
  });

  it.each(['float16', 'bfloat16'] as const)('%s operands give a result of that dtype (f32 accumulation)', async (dtype) => {
    for (const [m, k, n] of [
      [3, 5, 7],
      [65, 129, 33],
      [9, 1025, 5],
    ]) {
      const r = await checkBoth([randomTensor([m, k], dtype), randomTensor([k, n], dtype)], mm, mmTol(dtype, k), `${dtype} ${m}x${k}x${n}`);
      expect(r.dtype).toBe(dtype);
    }
  });

  it('1-D operands: [k] @ [k, n], [m, k] @ [k], [k] @ [k] (0-d), [k] @ [b, k, n]', async () => {
    const cases: [number[], number[], number[]][] = [
      [[7], [7, 5], [5]],
      [[6, 7], [7], [6]],
      [[129], [129], []],
      [[7], [3, 7, 5], [3, 5]],
      [[3, 6, 7], [7], [3, 6]],
    ];
    for (const [sa, sb, out] of cases) {
      const r = await checkBoth([randomTensor(sa), randomTensor(sb)], mm, mmTol('float32', sa[sa.length - 1]), `${JSON.stringify(sa)} @ ${JSON.stringify(sb)}`);
      expect(r.shape).toEqual(out);
    }
  });

  it('batched with broadcast batch dims: [2,1,m,k] @ [3,k,n], [4,m,k] @ [k,n], [1,m,k] @ [5,k,n]', async () => {
    const cases: [number[], number[], number[]][] = [
      [
        [2, 1, 9, 13],
        [3, 13, 11],
        [2, 3, 9, 11],
      ],
      [
        [4, 33, 17],
        [17, 65],
        [4, 33, 65],
      ],
      [
        [1, 5, 6],
        [5, 6, 7],
        [5, 5, 7],
      ],
      [
        [2, 3, 1, 4, 5],
        [3, 2, 5, 6],
        [2, 3, 2, 4, 6],
      ],
    ];
    for (const [sa, sb, out] of cases) {
      const r = await checkBoth([randomTensor(sa), randomTensor(sb)], mm, mmTol('float32', sa[sa.length - 1]), `${JSON.stringify(sa)} @ ${JSON.stringify(sb)}`);
      expect(r.shape).toEqual(out);
    }
    const f16 = await checkBoth([randomTensor([2, 1, 9, 13], 'float16'), randomTensor([3, 13, 11], 'float16')], mm, mmTol('float16', 13));
    expect(f16.shape).toEqual([2, 3, 9, 11]);
  });

  it('transposed operands (a.T @ b.T), permuted batches, expanded and offset views', async () => {
    for (const dtype of ['float32', 'float16'] as const) {
      const tol = mmTol(dtype, 70);
      const a = randomTensor([70, 33], dtype); // used as [33, 70] via .T
      const b = randomTensor([19, 70], dtype); // used as [70, 19] via .T
      await checkBoth([a, b], (x, y) => x.T.matmul(y.T), tol, `a.T @ b.T ${dtype}`);
      await checkBoth([a, b], (x, y) => y.matmul(x), tol, `b @ a ${dtype}`);
      await checkBoth([a], (x) => x.T.matmul(x), tol, `a.T @ a ${dtype}`);
      // Offset views: rows/cols narrowed at odd starts (mid-word for f16), stepped slices.
      await checkBoth(
        [a, b],
        (x, y) =>
          y
            .narrow(0, 3, 11)
            .narrow(1, 1, 65)
            .matmul(x.narrow(0, 1, 65).narrow(1, 5, 27)),
        mmTol(dtype, 65),
        `narrowed ${dtype}`,
      );
      await checkBoth([a, b], (x, y) => y.slice(1, 0, undefined, 2).matmul(x.slice(0, 1, undefined, 2)), mmTol(dtype, 35), `stepped ${dtype}`);
      // Batch dims that are permuted / expanded (stride 0).
      const c = randomTensor([5, 4, 6], dtype);
      const d = randomTensor([4, 6, 3], dtype);
      await checkBoth([c, d], (x, y) => x.permute(1, 0, 2).matmul(y.transpose(1, 2).transpose(1, 2)), mmTol(dtype, 6), `permuted batch ${dtype}`);
      await checkBoth(
        [c, d],
        (x, y) =>
          x
            .narrow(0, 1, 1)
            .expand(3, 4, 6)
            .matmul(y.narrow(0, 0, 1).expand(3, 6, 3)),
        mmTol(dtype, 6),
        `expanded batch ${dtype}`,
      );
    }
  });

  it('K = 0 gives zeros; M = 0 or N = 0 give empty results', async () => {
    const z = await checkBoth([randomTensor([3, 0]), randomTensor([0, 4])], mm, { atol: 0, rtol: 0 });
    expect(z.shape).toEqual([3, 4]);
    expect(Array.from(z.cpu)).toEqual(new Array(12).fill(0));
    const z16 = await checkBoth([randomTensor([2, 5, 0], 'float16'), randomTensor([0, 3], 'float16')], mm, { atol: 0, rtol: 0 });
    expect(Array.from(z16.gpu)).toEqual(new Array(30).fill(0));
    expect((await checkBoth([randomTensor([0, 4]), randomTensor([4, 5])], mm, { atol: 0, rtol: 0 })).shape).toEqual([0, 5]);
    expect((await checkBoth([randomTensor([3, 4]), randomTensor([4, 0])], mm, { atol: 0, rtol: 0 })).shape).toEqual([3, 0]);
    expect((await checkBoth([randomTensor([0, 3, 4]), randomTensor([4, 2])], mm, { atol: 0, rtol: 0 })).shape).toEqual([0, 3, 2]);
  });

  it('NaN and Inf in an operand reach exactly the outputs that use them', async () => {
    const a = tg.tensor([
      [1, 2],
      [NaN, 0],
      [Infinity, 1],
    ]);
    const b = tg.tensor([
      [1, 0],
      [0, 1],
    ]);
    const r = await checkBoth([a, b], mm, tolerance('float32'));
    expect(Array.from(r.gpu)).toEqual([1, 2, NaN, NaN, Infinity, NaN]);
  });
});

/** Dispatches of each matmul kernel ('gemv', 'gemv-kn', 'gemm') while run ran. */
async function matmulKernelsDuring(run: () => Promise<unknown>): Promise<Record<string, number>> {
  await tg.synchronize();
  const before = tg.gpuCounters().byKernel;
  await run();
  await tg.synchronize();
  const after = tg.gpuCounters().byKernel;
  const out: Record<string, number> = {};
  for (const k of ['gemv', 'gemv-kn', 'gemm']) {
    const d = (after[k] ?? 0) - (before[k] ?? 0);
    if (d) out[k] = d;
  }
  return out;
}

// The decode GEMV over a [K, N] weight (gemv-kn.ts): M = 1..4, N contiguous. 16-byte chunks where the rows are
// aligned (N a multiple of 4 f32 / 8 bf16 / 16 FP8 elements), element by element otherwise; split-K lanes 4..64.
describe.skipIf(!gpu.available)(`matmul [M <= 4, K] x [K, N] (the [K, N] GEMV), WebGPU vs CPU ${gpu.skipReason}`, () => {
  it.each(['float32', 'float16', 'bfloat16'] as const)('%s: M = 1..4, N aligned and not, K short and long', async (dtype) => {
    // [m, k, n]: n = 4096/256 chunked, 1/7/33/1001 element by element; k = 4097 with n = 8 gives 64 split-K lanes.
    const shapes: [number, number, number][] = [
      [1, 1, 1],
      [1, 64, 256],
      [2, 37, 7],
      [3, 129, 33],
      [4, 300, 64],
      [1, 4097, 8],
      [2, 513, 1001],
      [1, 256, 4096],
    ];
    for (const [m, k, n] of shapes) {
      const used = await matmulKernelsDuring(() =>
        checkBoth([randomTensor([m, k], dtype), randomTensor([k, n], dtype)], mm, mmTol(dtype, k), `${dtype} ${m}x${k}x${n}`),
      );
      expect(used, `${dtype} ${m}x${k}x${n}`).toEqual({ 'gemv-kn': 1 });
    }
  });

  it('a bf16 / f16 weight cast to f32 on the way in, and 1-D [k] @ [k, n]', async () => {
    for (const wd of ['bfloat16', 'float16'] as const) {
      for (const [k, n] of [
        [100, 24],
        [65, 9],
      ]) {
        await checkBoth([randomTensor([2, k]), randomTensor([k, n], wd)], (a, b) => a.matmul(b.to('float32')), mmTol('float32', k), `f32 x ${wd}`);
      }
    }
    const used = await matmulKernelsDuring(() => checkBoth([randomTensor([77]), randomTensor([77, 12])], mm, mmTol('float32', 77), '[k] @ [k, n]'));
    expect(used).toEqual({ 'gemv-kn': 1 });
  });

  it('weight views: columns from an offset that is not a multiple of 4, rows from an offset, stepped rows, a padded row stride', async () => {
    for (const dtype of ['float32', 'bfloat16'] as const) {
      const w = randomTensor([70, 41], dtype);
      const x = randomTensor([3, 70], dtype);
      const cases: [string, (a: Tensor, b: Tensor) => Tensor][] = [
        ['columns 3..37', (a, b) => a.narrow(0, 0, 2).matmul(b.narrow(1, 3, 35))],
        ['rows 5..69, columns 1..', (a, b) => a.narrow(1, 5, 65).matmul(b.narrow(0, 5, 65).narrow(1, 1, 40))],
        ['every other row', (a, b) => a.narrow(1, 0, 35).matmul(b.slice(0, 0, undefined, 2))],
        ['activation a strided view', (a, b) => a.T.contiguous().T.narrow(0, 1, 2).matmul(b)],
      ];
      for (const [label, fn] of cases) {
        const used = await matmulKernelsDuring(() => checkBoth([x, w], fn, mmTol(dtype, 70), `${label} ${dtype}`));
        expect(used, label).toEqual({ 'gemv-kn': 1 });
      }
    }
    // A [K, 48] f32 weight narrowed to columns 16..39: rows 192 bytes apart, starting 64 bytes in (16-byte chunks),
    // and to columns 2..25 (not aligned: element by element). Both against the CPU.
    const w = randomTensor([33, 48]);
    const x = randomTensor([1, 33]);
    await checkBoth([x, w], (a, b) => a.matmul(b.narrow(1, 16, 24)), mmTol('float32', 33), 'aligned column window');
    await checkBoth([x, w], (a, b) => a.matmul(b.narrow(1, 2, 24)), mmTol('float32', 33), 'unaligned column window');
  });

  it('NaN and Inf reach exactly the outputs that use them; K = 0 gives zeros, N = 0 an empty result', async () => {
    const x = tg.tensor([[1, 2, 0.5]]);
    const w = tg.tensor([
      [1, NaN, 0, 2, 1],
      [0, 1, Infinity, 1, 0],
      [1, 1, 1, -Infinity, 0],
    ]);
    const r = await checkBoth([x, w], mm, tolerance('float32'));
    expect(Array.from(r.gpu)).toEqual([1.5, NaN, Infinity, -Infinity, 1]);
    const z = await checkBoth([randomTensor([2, 0]), randomTensor([0, 9])], mm, { atol: 0, rtol: 0 });
    expect(Array.from(z.gpu)).toEqual(new Array(18).fill(0));
    expect((await checkBoth([randomTensor([3, 4]), randomTensor([4, 0])], mm, { atol: 0, rtol: 0 })).shape).toEqual([3, 0]);
  });

  it('bias and residual epilogues: linear(x, W.T, bias, { residual }) with W stored [K, N], f32 and bf16', async () => {
    for (const dtype of ['float32', 'bfloat16'] as const) {
      for (const [m, k, n] of [
        [1, 96, 40],
        [3, 45, 13],
      ]) {
        const x = randomTensor([m, k], dtype);
        const w = randomTensor([k, n], dtype);
        const bias = randomTensor([n], dtype);
        const r = randomTensor([m, n], dtype);
        const used = await matmulKernelsDuring(() =>
          checkBoth([x, w, bias, r], (a, b, c, d) => tg.linear(a, b.T, c, { residual: d }), mmTol(dtype, k), `linear ${dtype} ${m}x${k}x${n}`),
        );
        expect(used['gemv-kn'], `${dtype} ${m}x${k}x${n}`).toBe(1);
      }
    }
  });

  it('M = 5 and batched products stay on the GEMM', async () => {
    const used = await matmulKernelsDuring(async () => {
      await checkBoth([randomTensor([5, 40]), randomTensor([40, 12])], mm, mmTol('float32', 40), 'M = 5');
      await checkBoth([randomTensor([2, 1, 40]), randomTensor([2, 40, 12])], mm, mmTol('float32', 40), 'batched M = 1');
    });
    expect(used).toEqual({ gemm: 2 });
  });
});

describe('matmul on the CPU against hand-computed values', () => {
  it('2x3 @ 3x2, vector forms, batch broadcast', async () => {
    const a = tg.tensor([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    const b = tg.tensor([
      [7, 8],
      [9, 10],
      [11, 12],
    ]);
    expect(await a.matmul(b).tolist()).toEqual([
      [58, 64],
      [139, 154],
    ]);
    expect(await tg.tensor([1, 2, 3]).matmul(b).tolist()).toEqual([58, 64]);
    expect(await a.matmul(tg.tensor([1, 0, -1])).tolist()).toEqual([-2, -2]);
    const dot = tg.tensor([1, 2, 3]).matmul(tg.tensor([4, 5, 6]));
    expect(dot.shape).toEqual([]);
    expect(await dot.item()).toBe(32);
    expect(await b.T.matmul(a.T).tolist()).toEqual([
      [58, 139],
      [64, 154],
    ]);
    const batched = await tg
      .cat([a.unsqueeze(0), a.mul(2).unsqueeze(0)], 0)
      .matmul(b)
      .tolist();
    expect(batched).toEqual([
      [
        [58, 64],
        [139, 154],
      ],
      [
        [116, 128],
        [278, 308],
      ],
    ]);
    expectClose(await a.to('float16').matmul(b.to('float16')).toArray(), [58, 64, 139, 154], { atol: 0, rtol: 0 });
  });
});
