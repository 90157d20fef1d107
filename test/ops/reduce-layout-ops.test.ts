// prod, var / std, logsumexp, any / all, reductions over several dims, layer_norm, stack / split / chunk / flip /
// repeat, tril / triu, masked_fill, scatter / scatter_add: WebGPU against the CPU backend on fresh random inputs
// (odd sizes, long rows, empty, NaN / Inf), torch's semantics on the CPU, and gradients against central differences.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice, tensor, type Tensor } from '../../src/index.js';
import { checkBoth, EXACT, randomTensor, tolerance } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { gradcheck } from '../helpers/gradcheck.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const ACC = tolerance('float32', 'accumulate');

describe.skipIf(!gpu.available)('reductions: WebGPU vs CPU', () => {
  it('prod, var, std, logsumexp, any, all over one dim, several, all; keepdim; long rows', async () => {
    for (const shape of [
      [3, 5, 7],
      [2, 4099],
      [1, 1],
      [5, 1025],
    ]) {
      const x = randomTensor(shape, 'float32', 'positive');
      const nx = randomTensor(shape, 'float32', 'normal', 3);
      const dimsets: (number | number[] | undefined)[] = [undefined, 0, -1, [0, shape.length - 1], []];
      for (const dim of dimsets) {
        const label = `${JSON.stringify(shape)} dim ${JSON.stringify(dim)}`;
        await checkBoth([x], (t) => tg.prod(t.mul(1.02).pow(0.1), dim), ACC, `prod ${label}`);
        await checkBoth([nx], (t) => tg.variance(t, dim), ACC, `var ${label}`);
        await checkBoth([nx], (t) => tg.std(t, dim, { correction: 0, keepdim: true }), ACC, `std ${label}`);
        await checkBoth([nx], (t) => tg.logsumexp(t, dim), ACC, `logsumexp ${label}`);
        await checkBoth([nx], (t) => tg.any(t.gt(2.5), dim), EXACT, `any ${label}`);
        await checkBoth([nx], (t) => tg.all(t.gt(-2.5), dim, { keepdim: true }), EXACT, `all ${label}`);
        await checkBoth([nx], (t) => tg.sum(t, dim, { keepdim: true }), ACC, `sum ${label}`);
        await checkBoth([nx], (t) => tg.mean(t, dim), ACC, `mean ${label}`);
        await checkBoth([nx], (t) => tg.max(t, dim), EXACT, `max ${label}`);
      }
      x.dispose();
      nx.dispose();
    }
    const ints = randomTensor([3, 9], 'int32');
    await checkBoth([ints], (t) => tg.prod(t, 1), EXACT, 'int32 prod (wraps)');
    ints.dispose();
  });
  it('empty dims, NaN and Inf', async () => {
    const e = tg.zeros([3, 0]);
    await checkBoth([e], (t) => tg.prod(t, 1), EXACT, 'prod of empty is 1');
    await checkBoth([e], (t) => tg.logsumexp(t, 1), EXACT, 'logsumexp of empty is -Inf');
    await checkBoth([e], (t) => tg.any(t, 1), EXACT);
    await checkBoth([e], (t) => tg.all(t, 1), EXACT);
    const s = tensor([
      [NaN, 1, 2],
      [Infinity, 1, 2],
      [-Infinity, -Infinity, -Infinity],
      [0, 0, 0],
    ]);
    await checkBoth([s], (t) => tg.logsumexp(t, 1), EXACT, 'logsumexp specials');
    await checkBoth([s], (t) => tg.any(t, 1), EXACT, 'any specials');
    await checkBoth([s], (t) => tg.variance(t, 1), EXACT, 'var specials');
    for (const t of [e, s]) t.dispose();
  });
  it('layer_norm with weight and bias, long rows, float16', async () => {
    for (const [shape, dtype] of [
      [[3, 7], 'float32'],
      [[2, 3, 4099], 'float32'],
      [[5, 33], 'float16'],
    ] as const) {
      const d = shape[shape.length - 1];
      const x = randomTensor(shape, dtype, 'normal', 2);
      const w = randomTensor([d], dtype);
      const b = randomTensor([d], dtype);
      await checkBoth([x, w, b], (t, tw, tb) => tg.layerNorm(t, [d], tw, tb, 1e-5), tolerance(dtype, 'accumulate'), `layerNorm ${shape}`);
      for (const t of [x, w, b]) t.dispose();
    }
  });
});

describe('reductions: torch semantics on the CPU', () => {
  it('var uses Bessel by default, logsumexp is stable, prod of a zero', async () => {
    const x = tensor([1, 2, 3, 4]);
    expect(await tg.variance(x).item()).toBeCloseTo(1.6666666, 5);
    expect(await tg.variance(x, 0, { correction: 0 }).item()).toBeCloseTo(1.25, 6);
    expect(await tg.std(tensor([5])).item()).toBeNaN();
    expect(await tg.logsumexp(tensor([1000, 1000])).item()).toBeCloseTo(1000 + Math.LN2, 3);
    expect(await tg.logsumexp(tensor([-Infinity, -Infinity])).item()).toBe(-Infinity);
    expect(await tg.prod(tensor([2, 0, 3])).item()).toBe(0);
    expect(tg.sum(tg.ones([2, 3, 4]), [0, 2]).shape).toEqual([3]);
    expect(tg.sum(tg.ones([2, 3, 4]), [0, 2], { keepdim: true }).shape).toEqual([1, 3, 1]);
    expect(await tg.sum(tg.ones([2, 3, 4]), []).item()).toBe(24);
    expect(() => tg.sum(tg.ones([2, 3]), [1, -1])).toThrow(/twice/);
    expect(tg.any(tensor([0, 0])).dtype).toBe('bool');
  });
  it('gradients: prod (with a zero), var, std, logsumexp, layer_norm, sum over dims', async () => {
    await gradcheck('prod dim', (x) => tg.prod(x, 1), [randomTensor([2, 4])]);
    await gradcheck('prod with a zero', (x) => tg.prod(x, 0), [
      tensor([
        [0, 1.5],
        [2, 0],
        [0.5, 1.2],
      ]),
    ]);
    await gradcheck('var', (x) => tg.variance(x, [0, 2]), [randomTensor([2, 3, 2])]);
    await gradcheck('std', (x) => tg.std(x, 1, { correction: 0 }), [randomTensor([2, 5])]);
    await gradcheck('logsumexp', (x) => tg.logsumexp(x, -1), [randomTensor([3, 4])]);
    await gradcheck('mean over dims', (x) => tg.mean(x, [0, 1]), [randomTensor([2, 3, 2])]);
    await gradcheck('layer_norm', (x, w, b) => tg.layerNorm(x, [5], w, b), [randomTensor([3, 5]), randomTensor([5]), randomTensor([5])], { atol: 5e-3 });
  });
});

describe.skipIf(!gpu.available)('layout and mask ops: WebGPU vs CPU', () => {
  it('stack, split, chunk, flip, repeat, tril, triu, masked_fill', async () => {
    const x = randomTensor([5, 7, 3]);
    const y = randomTensor([5, 7, 3]);
    await checkBoth([x, y], (a, b) => tg.stack([a, b], 1), EXACT, 'stack');
    await checkBoth([x], (a) => tg.split(a, 2, 1)[3], EXACT, 'split size');
    await checkBoth([x], (a) => tg.split(a, [1, 4, 2], 1)[1].contiguous(), EXACT, 'split sections');
    await checkBoth([x], (a) => tg.chunk(a, 3, 0)[1].contiguous(), EXACT, 'chunk');
    await checkBoth([x], (a) => tg.flip(a, [0, 2]), EXACT, 'flip');
    await checkBoth([x], (a) => tg.flip(a.T, 1), EXACT, 'flip of a view');
    await checkBoth([x], (a) => tg.repeat(a, [2, 1, 3, 2]), EXACT, 'repeat');
    for (const diag of [-2, 0, 3]) {
      await checkBoth([x], (a) => tg.tril(a.transpose(0, 2), diag), EXACT, `tril ${diag}`);
      await checkBoth([x], (a) => tg.triu(a, diag), EXACT, `triu ${diag}`);
    }
    const m = randomTensor([7, 1], 'bool');
    await checkBoth([x, m], (a, k) => tg.maskedFill(a, k, -1.5), EXACT, 'masked_fill');
    const e = tg.zeros([0, 4]);
    await checkBoth([e], (a) => tg.flip(a, 0), EXACT, 'flip empty');
    await checkBoth([e], (a) => tg.tril(a), EXACT, 'tril empty');
    for (const t of [x, y, m, e]) t.dispose();
  });
  it('scatter and scatter_add, repeated indices in index order', async () => {
    const x = randomTensor([4, 5]);
    const src = randomTensor([3, 6]);
    const index = tensor(
      [
        [0, 1, 3, 3, 2],
        [4, 4, 0, 1, 2],
        [1, 1, 1, 1, 1],
      ],
      { dtype: 'int32' },
    );
    const ix = index.narrow(1, 0, 4);
    await checkBoth([x, index, src], (a, i, s) => tg.scatterAdd(a, 1, i.remainder(5).narrow(0, 0, 3).narrow(1, 0, 5), s), EXACT, 'scatter_add dim 1');
    await checkBoth([x, ix, src], (a, i, s) => tg.scatterAdd(a, 0, i.remainder(4), s), ACC, 'scatter_add dim 0');
    const uniq = tensor([[3, 0, 2, 1, 4]], { dtype: 'int32' });
    await checkBoth([x, uniq, src], (a, i, s) => tg.scatter(a, 1, i, s), EXACT, 'scatter');
    await checkBoth([x, uniq], (a, i) => tg.scatter(a, 1, i, 9), EXACT, 'scatter a number');
    for (const t of [x, src, index, ix, uniq]) t.dispose();
  });
});

describe('layout ops: torch semantics and gradients on the CPU', () => {
  it('values', async () => {
    const x = tensor([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    expect(await tg.flip(x, [0, 1]).tolist()).toEqual([
      [6, 5, 4],
      [3, 2, 1],
    ]);
    expect(await tg.repeat(tensor([1, 2]), [2, 2]).tolist()).toEqual([
      [1, 2, 1, 2],
      [1, 2, 1, 2],
    ]);
    expect(await tg.tril(x).tolist()).toEqual([
      [1, 0, 0],
      [4, 5, 0],
    ]);
    expect(await tg.triu(x, 1).tolist()).toEqual([
      [0, 2, 3],
      [0, 0, 6],
    ]);
    expect(tg.chunk(tg.ones([5]), 3).map((t) => t.shape[0])).toEqual([2, 2, 1]);
    expect(tg.chunk(tg.ones([6]), 4).map((t) => t.shape[0])).toEqual([2, 2, 2]);
    expect(tg.split(tg.ones([5]), 2).map((t) => t.shape[0])).toEqual([2, 2, 1]);
    expect(tg.stack([x, x], -1).shape).toEqual([2, 3, 2]);
    expect(await tg.scatterAdd(tg.zeros([3]), 0, tensor([0, 2, 0], { dtype: 'int32' }), tensor([1, 2, 3])).tolist()).toEqual([4, 0, 2]);
    expect(await tg.maskedFill(tensor([1, 2, 3], { dtype: 'int32' }), tensor([1, 0, 1], { dtype: 'bool' }), 7).tolist()).toEqual([7, 2, 7]);
    expect(() => tg.split(tg.ones([5]), [2, 2])).toThrow(/adding up to 5/);
  });
  it('gradients', async () => {
    const w = (x: Tensor) => x.mul(1);
    await gradcheck('stack', (a, b) => tg.stack([a, b], 1), [randomTensor([2, 3]), randomTensor([2, 3])]);
    await gradcheck('split', (a) => tg.split(w(a), [1, 2], 1)[1].contiguous(), [randomTensor([2, 3])]);
    await gradcheck('flip', (a) => tg.flip(a, [0, 1]), [randomTensor([2, 3])]);
    await gradcheck('repeat', (a) => tg.repeat(a, [2, 1, 2]), [randomTensor([2, 3])]);
    await gradcheck('tril', (a) => tg.tril(a, -1), [randomTensor([3, 3])]);
    await gradcheck('masked_fill', (a) => tg.maskedFill(a, tensor([true, false, true].map(Number), { dtype: 'bool' }), 0), [randomTensor([2, 3])]);
    const idx = tensor(
      [
        [0, 2],
        [1, 1],
      ],
      { dtype: 'int32' },
    );
    await gradcheck('scatter_add', (a, s) => tg.scatterAdd(a, 1, idx, s), [randomTensor([2, 3]), randomTensor([2, 2])]);
  });
});
