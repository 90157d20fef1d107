// conv1d and convTranspose1d on WebGPU against the CPU backend, on seeded random inputs: strides 1 / 2 / 3, dilation
// 2 and 3, groups 1 / 2 / C (depthwise, with and without a channel multiplier), causal, 'same', asymmetric and
// symmetric padding, outputPadding, odd lengths, long rows (L = 5000), bias on and off, unbatched [C, L] inputs,
// f32/f16/bf16 activations with weights and bias of other dtypes, strided views read in place. Independent checks
// pin the definitions apart from the CPU backend: conv1d against a direct sum computed here, convTranspose1d against
// a scatter computed here and as the adjoint of conv1d (<conv1d(x, w), y> = <x, convTranspose1d(y, w)>), plus
// hand-computed values. Dispatch counts: exactly one per op (padding, bias and views included), none for empty
// results. Errors are typed.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { DTypeError, setDefaultDevice, ShapeError, type DType, type Tensor } from '../../src/index.js';
import { checkBoth, expectClose, randomTensor, type Tolerance } from '../helpers/compare.js';
import { dispatchesOf, setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

type Float = 'float32' | 'float16' | 'bfloat16';

/**
 * GPU (f32 fma accumulation) vs CPU (f64), both rounded once to x's dtype. Sums here have up to ~60 products of
 * standard normals: f32 error stays far below 1e-5 absolute. Narrow outputs may round the two sums to neighbouring
 * values: 1 ulp (2^-10 f16, 2^-7 bf16 relative) plus the f32 slack for results near zero.
 */
function tol(dtype: Float): Tolerance {
  if (dtype === 'float32') return { atol: 5e-5, rtol: 2e-5 };
  return { atol: 1e-4, rtol: (dtype === 'float16' ? 2 ** -10 : 2 ** -7) * 1.05 };
}

const cpuTensor = (values: number[], shape: number[], dtype: DType = 'float32') => tg.tensor(values, { shape, dtype });
const valuesOf = async (t: Tensor) => Array.from(await t.toArray());

interface Case<O> {
  label: string;
  x: number[];
  w: number[];
  bias: boolean;
  options: O;
}

const CONV1D: Case<tg.Conv1dOptions>[] = [
  { label: 'k 3, stride 1, padding 1', x: [2, 4, 17], w: [6, 4, 3], bias: true, options: { padding: 1 } },
  { label: 'stride 2, padding 1, odd length', x: [1, 3, 19], w: [5, 3, 3], bias: false, options: { stride: 2, padding: 1 } },
  { label: 'stride 3, k 5, padding 2', x: [2, 4, 23], w: [4, 4, 5], bias: true, options: { stride: 3, padding: 2 } },
  { label: 'dilation 2, padding 2', x: [1, 4, 16], w: [3, 4, 3], bias: true, options: { dilation: 2, padding: 2 } },
  { label: 'groups 2', x: [2, 4, 15], w: [6, 2, 3], bias: true, options: { groups: 2, padding: 1 } },
  { label: 'depthwise (groups = C), causal', x: [1, 5, 21], w: [5, 1, 3], bias: false, options: { groups: 5, padding: 'causal' } },
  { label: 'depthwise with multiplier 2, stride 2', x: [2, 3, 14], w: [6, 1, 4], bias: true, options: { groups: 3, stride: 2, padding: 1 } },
  { label: 'causal with dilation 2 (length kept)', x: [1, 3, 13], w: [4, 3, 3], bias: true, options: { padding: 'causal', dilation: 2 } },
  { label: "'same', even kernel, dilation 2", x: [1, 2, 11], w: [3, 2, 4], bias: false, options: { padding: 'same', dilation: 2 } },
  { label: 'asymmetric [2, 1], stride 3', x: [1, 3, 10], w: [8, 3, 3], bias: true, options: { padding: [2, 1], stride: 3 } },
  { label: "k 1, 'valid'", x: [3, 6, 7], w: [4, 6, 1], bias: true, options: { padding: 'valid' } },
  { label: 'long row L = 5000, causal', x: [1, 4, 5000], w: [8, 4, 5], bias: true, options: { padding: 'causal' } },
  { label: 'long row L = 5000, depthwise stride 2', x: [2, 3, 5000], w: [3, 1, 7], bias: false, options: { groups: 3, stride: 2, padding: 3 } },
];

const TRANSPOSED: Case<tg.ConvTranspose1dOptions>[] = [
  { label: 'k 3, stride 1', x: [2, 4, 9], w: [4, 3, 3], bias: true, options: {} },
  { label: 'stride 2, padding 1, outputPadding 1, even k', x: [1, 3, 10], w: [3, 5, 4], bias: false, options: { stride: 2, padding: 1, outputPadding: 1 } },
  { label: 'stride 3, k 5, padding 2, outputPadding 2', x: [2, 4, 7], w: [4, 2, 5], bias: true, options: { stride: 3, padding: 2, outputPadding: 2 } },
  {
    label: 'stride 2, dilation 2 (no tap skipped by parity), outputPadding 1',
    x: [1, 3, 8],
    w: [3, 4, 3],
    bias: true,
    options: { stride: 2, dilation: 2, outputPadding: 1 },
  },
  { label: 'stride 3, dilation 2, padding 3', x: [1, 2, 9], w: [2, 3, 5], bias: true, options: { stride: 3, dilation: 2, padding: 3 } },
  { label: 'dilation 3, stride 1, outputPadding 2', x: [1, 3, 11], w: [3, 2, 3], bias: false, options: { dilation: 3, outputPadding: 2 } },
  { label: 'groups 2, stride 2', x: [2, 4, 11], w: [4, 3, 3], bias: true, options: { groups: 2, stride: 2 } },
  { label: 'depthwise (groups = C), stride 2, padding 1', x: [1, 5, 13], w: [5, 1, 4], bias: true, options: { groups: 5, stride: 2, padding: 1 } },
  { label: 'depthwise with multiplier 2', x: [2, 3, 9], w: [3, 2, 3], bias: false, options: { groups: 3, padding: 1 } },
  { label: 'padding crops past the kernel span', x: [1, 2, 6], w: [2, 3, 3], bias: true, options: { stride: 3, padding: 3 } },
  { label: 'long row L = 5000, stride 2 upsampling', x: [1, 4, 5000], w: [4, 4, 4], bias: true, options: { stride: 2, padding: 1 } },
  {
    label: 'long row L = 5000, depthwise stride 3',
    x: [2, 3, 5000],
    w: [3, 1, 5],
    bias: false,
    options: { groups: 3, stride: 3, padding: 1, outputPadding: 2 },
  },
];

/**
 * Cases for the blocked float32 kernel (blocks of 8 or 4 output channels x up to 8 or 16 positions of one phase t mod
 * stride): channels per group not a multiple of the block (the last block overlaps), groups, phases of unequal
 * lengths and position counts not a multiple of the block, stride 3 with dilation 2, padding that puts a block's
 * first inputs below 0, and rows so short that the block shrinks to 4, 2 or 1 positions (lout < stride included).
 */
const BLOCKED: Case<tg.ConvTranspose1dOptions>[] = [
  { label: 'og 13: 8-channel blocks overlap, stride 2, 37 positions a phase', x: [2, 5, 37], w: [5, 13, 4], bias: true, options: { stride: 2, padding: 1 } },
  { label: 'og 6: 4-channel blocks overlap, 20 positions', x: [1, 3, 20], w: [3, 6, 3], bias: false, options: { padding: 1 } },
  { label: 'groups 2 with 12 output channels, stride 2, phases of 20 and 19', x: [2, 8, 19], w: [8, 6, 3], bias: true, options: { groups: 2, stride: 2 } },
  {
    label: 'groups 2 with 24 output channels, k 5, outputPadding 1',
    x: [1, 12, 23],
    w: [12, 12, 5],
    bias: true,
    options: { groups: 2, stride: 2, padding: 2, outputPadding: 1 },
  },
  {
    label: 'stride 3, dilation 2, padding 3, outputPadding 1',
    x: [1, 8, 29],
    w: [8, 9, 5],
    bias: true,
    options: { stride: 3, dilation: 2, padding: 3, outputPadding: 1 },
  },
  {
    label: 'stride 3, dilation 2, groups 3, padding crops past the kernel span',
    x: [2, 6, 10],
    w: [6, 4, 3],
    bias: false,
    options: { groups: 3, stride: 3, dilation: 2, padding: 5 },
  },
  { label: 'dilation 3, padding 4: blocks start below input 0', x: [3, 4, 30], w: [4, 9, 3], bias: true, options: { dilation: 3, padding: 4 } },
  { label: 'short row: 1 position', x: [1, 8, 1], w: [8, 8, 1], bias: true, options: {} },
  { label: 'short row: 3 positions (2-position blocks)', x: [1, 8, 2], w: [8, 8, 2], bias: false, options: {} },
  { label: 'short row: stride 2, phases of 3 and 2', x: [2, 8, 2], w: [8, 9, 3], bias: true, options: { stride: 2 } },
  { label: 'short row: 4 positions (4-position blocks)', x: [1, 4, 3], w: [4, 8, 2], bias: true, options: {} },
  {
    label: 'short row: stride 4, dilation 2, phases of 2 and 1',
    x: [1, 4, 1],
    w: [4, 8, 3],
    bias: true,
    options: { stride: 4, dilation: 2, outputPadding: 1 },
  },
  { label: 'short row: lout 2 < stride 4', x: [2, 4, 1], w: [4, 8, 2], bias: false, options: { stride: 4 } },
  { label: 'long row L = 700, 16 -> 16 channels, stride 2 upsampling', x: [1, 16, 700], w: [16, 16, 4], bias: true, options: { stride: 2, padding: 1 } },
];

async function checkConv1d(c: Case<tg.Conv1dOptions>, xDtype: Float, wDtype: Float, unbatched = false): Promise<void> {
  const x = randomTensor(unbatched ? c.x.slice(1) : c.x, xDtype);
  const w = randomTensor(c.w, wDtype);
  const b = randomTensor([c.w[0]], wDtype);
  try {
    const r = await checkBoth(c.bias ? [x, w, b] : [x, w], (xx, ww, bb) => tg.conv1d(xx, ww, bb, c.options), tol(xDtype), `${c.label} x ${xDtype} w ${wDtype}`);
    expect(r.dtype).toBe(xDtype);
    expect(r.shape.length).toBe(unbatched ? 2 : 3);
  } finally {
    [x, w, b].forEach((t) => t.dispose());
  }
}

async function checkTransposed(c: Case<tg.ConvTranspose1dOptions>, xDtype: Float, wDtype: Float, bDtype: Float = wDtype, unbatched = false): Promise<void> {
  const x = randomTensor(unbatched ? c.x.slice(1) : c.x, xDtype);
  const w = randomTensor(c.w, wDtype);
  const groups = c.options.groups ?? 1;
  const b = randomTensor([c.w[1] * groups], bDtype);
  try {
    const r = await checkBoth(
      c.bias ? [x, w, b] : [x, w],
      (xx, ww, bb) => tg.convTranspose1d(xx, ww, bb, c.options),
      tol(xDtype),
      `${c.label} x ${xDtype} w ${wDtype}`,
    );
    expect(r.dtype).toBe(xDtype);
    const {
      stride = 1,
      padding = 0,
      outputPadding = 0,
      dilation = 1,
    } = c.options as { stride?: number; padding?: number; outputPadding?: number; dilation?: number };
    const l = c.x[2];
    const lout = (l - 1) * stride - 2 * padding + dilation * (c.w[2] - 1) + outputPadding + 1;
    expect(r.shape).toEqual(unbatched ? [c.w[1] * groups, lout] : [c.x[0], c.w[1] * groups, lout]);
  } finally {
    [x, w, b].forEach((t) => t.dispose());
  }
}

describe.skipIf(!gpu.available)(`conv1d, WebGPU vs CPU ${gpu.skipReason}`, () => {
  it.each(CONV1D.map((c) => [c.label, c] as const))('%s (f32)', async (_, c) => {
    await checkConv1d(c, 'float32', 'float32');
  });

  it('f16 / bf16 activations and mixed weight dtypes (odd output counts: half-filled words)', async () => {
    const pairs: [Float, Float][] = [
      ['float32', 'bfloat16'],
      ['float16', 'float16'],
      ['bfloat16', 'bfloat16'],
      ['bfloat16', 'float32'],
      ['float16', 'bfloat16'],
    ];
    for (const [xd, wd] of pairs) {
      await checkConv1d(CONV1D[1], xd, wd);
      await checkConv1d(CONV1D[5], xd, wd);
    }
    await checkConv1d(CONV1D[2], 'float16', 'float32');
    await checkConv1d(CONV1D[11], 'bfloat16', 'bfloat16');
  });

  it('unbatched [C, L] gives [O, Lout]', async () => {
    await checkConv1d(CONV1D[0], 'float32', 'float32', true);
    await checkConv1d(CONV1D[6], 'float16', 'bfloat16', true);
  });

  it('strided views are read in place: transposed x, sliced x at an odd offset, permuted weight, strided bias', async () => {
    // x stored [N, L, C] and transposed; weight stored [O, k, C] and permuted; bias every other element.
    const xt = randomTensor([2, 17, 4]);
    const wt = randomTensor([6, 3, 4]);
    const b2 = randomTensor([12]);
    const view = (x: Tensor, w: Tensor, b: Tensor) => tg.conv1d(x.transpose(1, 2), w.permute(0, 2, 1), b.slice(0, 1, 12, 2), { padding: 1, stride: 2 });
    await checkBoth([xt, wt, b2], view, tol('float32'), 'transposed');
    for (const dtype of ['float16', 'bfloat16'] as const) {
      const x = randomTensor([1, 3, 20], dtype);
      const w = randomTensor([3, 1, 3], dtype);
      await checkBoth([x, w], (a, ww) => tg.conv1d(a.slice(2, 1, 16), ww, undefined, { groups: 3, padding: 'causal' }), tol(dtype), `${dtype} sliced`);
      // Unbatched and transposed: [L, C] storage.
      const u = randomTensor([11, 3], dtype);
      await checkBoth([u, w], (a, ww) => tg.conv1d(a.T, ww, undefined, { groups: 3, padding: 'same' }), tol(dtype), `${dtype} unbatched transposed`);
      [x, w, u].forEach((t) => t.dispose());
    }
    [xt, wt, b2].forEach((t) => t.dispose());
  });

  it('one dispatch per conv1d: padding (causal, same), bias, groups and views add none', async () => {
    const x = randomTensor([2, 4, 33]);
    const w = randomTensor([6, 4, 3]);
    const wd = randomTensor([4, 1, 5]);
    const b = randomTensor([6], 'bfloat16');
    expect(await dispatchesOf([x, w, b], (xx, ww, bb) => tg.conv1d(xx, ww, bb, { padding: 'causal' }))).toBe(1);
    expect(await dispatchesOf([x, w, b], (xx, ww, bb) => tg.conv1d(xx.slice(2, 1, 30), ww, bb, { padding: [3, 0], stride: 3 }))).toBe(1);
    expect(await dispatchesOf([x, wd], (xx, ww) => tg.conv1d(xx, ww, undefined, { groups: 4, padding: 'same', dilation: 2 }))).toBe(1);
    expect(await dispatchesOf([x, w], (xx, ww) => tg.conv1d(xx.select(0, 0), ww, undefined, { padding: 1 }))).toBe(1);
    [x, w, wd, b].forEach((t) => t.dispose());
  });

  it('empty batch and zero output channels: empty results, no dispatch', async () => {
    const x = randomTensor([0, 3, 9]);
    const w = randomTensor([4, 3, 3]);
    const r = await checkBoth([x, w], (a, b) => tg.conv1d(a, b, undefined, { padding: 'causal' }), tol('float32'));
    expect(r.shape).toEqual([0, 4, 9]);
    expect(await dispatchesOf([x, w], (a, b) => tg.conv1d(a, b, undefined, { padding: 'causal' }))).toBe(0);
    const x1 = randomTensor([2, 3, 9]);
    const w0 = randomTensor([0, 3, 3]);
    const r0 = await checkBoth([x1, w0], (a, b) => tg.conv1d(a, b, undefined, { stride: 2 }), tol('float32'));
    expect(r0.shape).toEqual([2, 0, 4]);
    expect(await dispatchesOf([x1, w0], (a, b) => tg.conv1d(a, b))).toBe(0);
    [x, w, x1, w0].forEach((t) => t.dispose());
  });
});

describe.skipIf(!gpu.available)(`convTranspose1d, WebGPU vs CPU ${gpu.skipReason}`, () => {
  it.each(TRANSPOSED.map((c) => [c.label, c] as const))('%s (f32)', async (_, c) => {
    await checkTransposed(c, 'float32', 'float32');
  });

  it.each(BLOCKED.map((c) => [c.label, c] as const))('blocked: %s (f32)', async (_, c) => {
    await checkTransposed(c, 'float32', 'float32');
  });

  it('blocked: f32 output from f16 / bf16 weights and bias; f16 / bf16 outputs of many channels (packed)', async () => {
    const sets: [Float, Float, Float][] = [
      ['float32', 'bfloat16', 'float16'],
      ['float32', 'float16', 'float32'],
      ['float16', 'float16', 'float16'],
      ['bfloat16', 'float32', 'bfloat16'],
    ];
    for (const [xd, wd, bd] of sets) {
      await checkTransposed(BLOCKED[0], xd, wd, bd);
      await checkTransposed(BLOCKED[4], xd, wd, bd);
    }
    await checkTransposed(BLOCKED[2], 'float32', 'float32', 'float32', true);
  });

  it('blocked: strided views read in place: transposed x and weight views, sliced x, strided bias', async () => {
    // x stored [N, L, C]; weight stored [k, C, O/groups] permuted to [C, O/groups, k]; bias every other element.
    const xt = randomTensor([2, 17, 8]);
    const wk = randomTensor([5, 8, 6]);
    const b2 = randomTensor([24]);
    const opts = { stride: 3, dilation: 2, padding: 2, outputPadding: 1, groups: 2 };
    await checkBoth(
      [xt, wk, b2],
      (x, w, b) => tg.convTranspose1d(x.transpose(1, 2), w.permute(1, 2, 0), b.slice(0, 0, 24, 2), opts),
      tol('float32'),
      'permuted',
    );
    // weight stored [O/groups, C, k] and transposed to [C, O/groups, k]; x sliced in channels and length at odd offsets.
    const xs = randomTensor([2, 13, 31]);
    const wo = randomTensor([9, 6, 4]);
    await checkBoth(
      [xs, wo],
      (x, w) => tg.convTranspose1d(x.slice(1, 1, 13, 2).slice(2, 3, 28), w.transpose(0, 1), undefined, { stride: 2, padding: 1 }),
      tol('float32'),
      'sliced',
    );
    // Unbatched [C, L] from a transposed [L, C], weight [C, k, O/groups] transposed to [C, O/groups, k].
    const u = randomTensor([21, 6]);
    const wt = randomTensor([6, 3, 12]);
    await checkBoth(
      [u, wt],
      (x, w) => tg.convTranspose1d(x.T, w.transpose(1, 2), undefined, { stride: 2, dilation: 2, outputPadding: 1, groups: 3 }),
      tol('float32'),
      'unbatched',
    );
    [xt, wk, b2, xs, wo, u, wt].forEach((t) => t.dispose());
  });

  it('blocked: one dispatch, views and bias included', async () => {
    const x = randomTensor([2, 8, 40]);
    const w = randomTensor([8, 12, 4]);
    const b = randomTensor([24]);
    const wt = randomTensor([12, 8, 4]);
    expect(await dispatchesOf([x, w, b], (xx, ww, bb) => tg.convTranspose1d(xx, ww, bb, { stride: 2, padding: 1, groups: 2 }))).toBe(1);
    expect(
      await dispatchesOf([x, wt, b], (xx, ww, bb) =>
        tg.convTranspose1d(xx.slice(2, 1, 37), ww.transpose(0, 1), bb.slice(0, 0, 24, 2), { stride: 3, dilation: 2 }),
      ),
    ).toBe(1);
    [x, w, b, wt].forEach((t) => t.dispose());
  });

  it('f16 / bf16 activations and mixed weight and bias dtypes (odd output counts: half-filled words)', async () => {
    const sets: [Float, Float, Float][] = [
      ['float32', 'bfloat16', 'float16'],
      ['float16', 'float16', 'float16'],
      ['bfloat16', 'bfloat16', 'float32'],
      ['bfloat16', 'float32', 'bfloat16'],
      ['float16', 'bfloat16', 'float32'],
    ];
    for (const [xd, wd, bd] of sets) {
      await checkTransposed(TRANSPOSED[2], xd, wd, bd);
      await checkTransposed(TRANSPOSED[7], xd, wd, bd);
    }
    await checkTransposed(TRANSPOSED[10], 'float16', 'float16');
  });

  it('unbatched [C, L] gives [O, Lout]', async () => {
    await checkTransposed(TRANSPOSED[1], 'float32', 'float32', 'float32', true);
    await checkTransposed(TRANSPOSED[6], 'bfloat16', 'float32', 'float32', true);
  });

  it('strided views are read in place: transposed x, sliced x at an odd offset, permuted weight, strided bias', async () => {
    const xt = randomTensor([2, 11, 4]);
    const wt = randomTensor([3, 4, 4]);
    const b2 = randomTensor([16]);
    // x stored [N, L, C]; weight stored [k, C, O/groups] and permuted to [C, O/groups, k]; bias every other element.
    const view = (x: Tensor, w: Tensor, b: Tensor) =>
      tg.convTranspose1d(x.transpose(1, 2), w.permute(1, 2, 0), b.slice(0, 0, 16, 2), { stride: 2, padding: 1, outputPadding: 1, groups: 2 });
    await checkBoth([xt, wt, b2], view, tol('float32'), 'transposed');
    for (const dtype of ['float16', 'bfloat16'] as const) {
      const x = randomTensor([2, 6, 15], dtype);
      const w = randomTensor([3, 2, 3], dtype);
      await checkBoth(
        [x, w],
        (a, ww) => tg.convTranspose1d(a.slice(1, 1, 6, 2).slice(2, 3), ww, undefined, { stride: 3, groups: 3 }),
        tol(dtype),
        `${dtype} sliced`,
      );
      const u = randomTensor([9, 3], dtype);
      await checkBoth(
        [u, w],
        (a, ww) => tg.convTranspose1d(a.T, ww, undefined, { stride: 2, dilation: 2, outputPadding: 1 }),
        tol(dtype),
        `${dtype} unbatched transposed`,
      );
      [x, w, u].forEach((t) => t.dispose());
    }
    [xt, wt, b2].forEach((t) => t.dispose());
  });

  it('one dispatch per convTranspose1d: stride, padding, outputPadding, bias, groups and views add none', async () => {
    const x = randomTensor([2, 4, 33]);
    const w = randomTensor([4, 3, 4]);
    const b = randomTensor([6], 'float16');
    expect(await dispatchesOf([x, w, b], (xx, ww, bb) => tg.convTranspose1d(xx, ww, bb, { stride: 2, padding: 1, outputPadding: 1, groups: 2 }))).toBe(1);
    expect(await dispatchesOf([x, w], (xx, ww) => tg.convTranspose1d(xx.slice(2, 1, 30), ww, undefined, { stride: 3, dilation: 2 }))).toBe(1);
    expect(await dispatchesOf([x, w], (xx, ww) => tg.convTranspose1d(xx.select(0, 1), ww))).toBe(1);
    [x, w, b].forEach((t) => t.dispose());
  });

  it('empty batch and zero output channels: empty results, no dispatch', async () => {
    const x = randomTensor([0, 4, 9]);
    const w = randomTensor([4, 3, 4]);
    const b = randomTensor([3]);
    const r = await checkBoth([x, w, b], (a, ww, bb) => tg.convTranspose1d(a, ww, bb, { stride: 2, padding: 1 }), tol('float32'));
    expect(r.shape).toEqual([0, 3, 18]);
    expect(await dispatchesOf([x, w, b], (a, ww, bb) => tg.convTranspose1d(a, ww, bb, { stride: 2 }))).toBe(0);
    const x1 = randomTensor([2, 4, 9]);
    const w0 = randomTensor([4, 0, 3]);
    const r0 = await checkBoth([x1, w0], (a, ww) => tg.convTranspose1d(a, ww), tol('float32'));
    expect(r0.shape).toEqual([2, 0, 11]);
    expect(await dispatchesOf([x1, w0], (a, ww) => tg.convTranspose1d(a, ww))).toBe(0);
    [x, w, b, x1, w0].forEach((t) => t.dispose());
  });
});

// ---- the definitions, apart from the CPU backend -------------------------------------------------------------------

/** conv1d by its definition, with explicit [before, after] zeros: a direct sum over channels and taps. */
function directConv1d(
  xs: number[],
  ws: number[],
  bs: number[] | undefined,
  [n, c, l]: number[],
  [o, cg, k]: number[],
  stride: number,
  dilation: number,
  [before, after]: number[],
  groups: number,
): { out: number[]; lout: number } {
  const lout = Math.floor((l + before + after - dilation * (k - 1) - 1) / stride) + 1;
  const og = o / groups;
  const out: number[] = [];
  for (let ni = 0; ni < n; ni++)
    for (let oi = 0; oi < o; oi++)
      for (let t = 0; t < lout; t++) {
        let acc = bs ? bs[oi] : 0;
        for (let ci = 0; ci < cg; ci++)
          for (let j = 0; j < k; j++) {
            const q = t * stride - before + j * dilation;
            if (q >= 0 && q < l) acc += xs[(ni * c + Math.floor(oi / og) * cg + ci) * l + q] * ws[(oi * cg + ci) * k + j];
          }
        out.push(acc);
      }
  return { out, lout };
}

/** convTranspose1d as a scatter: each input x[n, c, q] adds x * w[c, oo, j] into out[n, g*og + oo, q*stride - padding + j*dilation]. */
function scatterTransposed(
  xs: number[],
  ws: number[],
  bs: number[] | undefined,
  [n, c, l]: number[],
  [, og, k]: number[],
  stride: number,
  padding: number,
  outputPadding: number,
  dilation: number,
  groups: number,
): { out: number[]; lout: number } {
  const lout = (l - 1) * stride - 2 * padding + dilation * (k - 1) + outputPadding + 1;
  const o = og * groups;
  const cg = c / groups;
  const out = new Array<number>(n * o * lout).fill(0);
  for (let ni = 0; ni < n; ni++) for (let oi = 0; oi < o; oi++) for (let t = 0; t < lout; t++) out[(ni * o + oi) * lout + t] = bs ? bs[oi] : 0;
  for (let ni = 0; ni < n; ni++)
    for (let ci = 0; ci < c; ci++)
      for (let q = 0; q < l; q++)
        for (let oo = 0; oo < og; oo++)
          for (let j = 0; j < k; j++) {
            const t = q * stride - padding + j * dilation;
            if (t < 0 || t >= lout) continue;
            const oi = Math.floor(ci / cg) * og + oo;
            out[(ni * o + oi) * lout + t] += xs[(ni * c + ci) * l + q] * ws[(ci * og + oo) * k + j];
          }
  return { out, lout };
}

describe('conv1d / convTranspose1d definitions, pinned apart from the CPU backend', () => {
  const devices = gpu.available ? (['cpu', 'webgpu'] as const) : (['cpu'] as const);

  it.each(devices)('by hand (%s): causal conv1d and a stride-2 transposed conv', async (device) => {
    const x = await cpuTensor([1, 2, 3], [1, 1, 3]).to(device);
    const w = await cpuTensor([1, 10, 100], [1, 1, 3]).to(device);
    const b = await cpuTensor([0.5], [1]).to(device);
    // out[t] = sum_j w[j] x[t - 2 + j]: nothing read behind.
    const r = tg.conv1d(x, w, b, { padding: 'causal' });
    expect(r.shape).toEqual([1, 1, 3]);
    expect(await valuesOf(r)).toEqual([100.5, 210.5, 321.5]);
    // x = [1, 2], stride 2: 1 * w at t = 0..2, 2 * w at t = 2..4.
    const x2 = await cpuTensor([1, 2], [1, 1, 2]).to(device);
    const t = tg.convTranspose1d(x2, w, undefined, { stride: 2 });
    expect(t.shape).toEqual([1, 1, 5]);
    expect(await valuesOf(t)).toEqual([1, 10, 102, 20, 200]);
    // padding 1 crops one position from each end; outputPadding 1 gives back the last one (Lout = 4).
    const tp = tg.convTranspose1d(x2, w, b, { stride: 2, padding: 1, outputPadding: 1 });
    expect(await valuesOf(tp)).toEqual([10.5, 102.5, 20.5, 200.5]);
    // outputPadding past the full length reaches no tap: bias only.
    const te = tg.convTranspose1d(x2, w, b, { stride: 2, outputPadding: 1 });
    expect(await valuesOf(te)).toEqual([1.5, 10.5, 102.5, 20.5, 200.5, 0.5]);
    [x, w, b, r, x2, t, tp, te].forEach((a) => a.dispose());
  });

  const DIRECT: { x: number[]; w: number[]; stride: number; dilation: number; padding: tg.Conv1dPadding; pads: number[]; groups: number }[] = [
    { x: [2, 4, 13], w: [6, 2, 3], stride: 2, dilation: 1, padding: 1, pads: [1, 1], groups: 2 },
    { x: [1, 3, 17], w: [3, 1, 4], stride: 1, dilation: 2, padding: 'causal', pads: [6, 0], groups: 3 },
    { x: [2, 2, 10], w: [5, 2, 3], stride: 3, dilation: 2, padding: [3, 1], pads: [3, 1], groups: 1 },
    { x: [1, 4, 9], w: [4, 4, 4], stride: 1, dilation: 1, padding: 'same', pads: [1, 2], groups: 1 },
  ];

  it.each(devices)('conv1d equals a direct sum computed here (%s)', async (device) => {
    for (const c of DIRECT) {
      const x = randomTensor(c.x);
      const w = randomTensor(c.w);
      const b = randomTensor([c.w[0]]);
      const want = directConv1d(await valuesOf(x), await valuesOf(w), await valuesOf(b), c.x, c.w, c.stride, c.dilation, c.pads, c.groups);
      const on = await Promise.all([x, w, b].map((t) => t.to(device)));
      const got = tg.conv1d(on[0], on[1], on[2], { stride: c.stride, dilation: c.dilation, padding: c.padding, groups: c.groups });
      expect(got.shape).toEqual([c.x[0], c.w[0], want.lout]);
      expectClose(await got.toArray(), want.out, tol('float32'), `direct ${JSON.stringify(c)}`);
      [x, w, b, ...on, got].forEach((t) => t.dispose());
    }
  });

  interface Transposed {
    stride: number;
    padding: number;
    outputPadding: number;
    dilation: number;
    groups: number;
  }
  const SCATTER: { x: number[]; w: number[]; options: Transposed }[] = [
    { x: [2, 4, 7], w: [4, 3, 3], options: { stride: 2, padding: 1, outputPadding: 1, dilation: 1, groups: 2 } },
    { x: [1, 3, 6], w: [3, 2, 4], options: { stride: 3, padding: 2, outputPadding: 1, dilation: 2, groups: 3 } },
    { x: [2, 2, 5], w: [2, 3, 5], options: { stride: 1, padding: 3, outputPadding: 2, dilation: 3, groups: 1 } },
    { x: [1, 4, 8], w: [4, 2, 4], options: { stride: 4, padding: 0, outputPadding: 3, dilation: 1, groups: 1 } },
  ];

  it.each(devices)('convTranspose1d equals a scatter computed here (%s)', async (device) => {
    for (const c of SCATTER) {
      const x = randomTensor(c.x);
      const w = randomTensor(c.w);
      const b = randomTensor([c.w[1] * c.options.groups]);
      const o = c.options;
      const want = scatterTransposed(
        await valuesOf(x),
        await valuesOf(w),
        await valuesOf(b),
        c.x,
        c.w,
        o.stride,
        o.padding,
        o.outputPadding,
        o.dilation,
        o.groups,
      );
      const on = await Promise.all([x, w, b].map((t) => t.to(device)));
      const got = tg.convTranspose1d(on[0], on[1], on[2], c.options);
      expect(got.shape).toEqual([c.x[0], c.w[1] * o.groups, want.lout]);
      expectClose(await got.toArray(), want.out, tol('float32'), `scatter ${JSON.stringify(c)}`);
      [x, w, b, ...on, got].forEach((t) => t.dispose());
    }
  });

  const ADJOINT: { x: number[]; w: number[]; stride: number; padding: number; dilation: number; groups: number }[] = [
    { x: [2, 4, 19], w: [6, 4, 3], stride: 1, padding: 1, dilation: 1, groups: 1 },
    { x: [1, 4, 20], w: [6, 2, 4], stride: 2, padding: 1, dilation: 1, groups: 2 },
    { x: [2, 3, 23], w: [3, 1, 5], stride: 3, padding: 2, dilation: 1, groups: 3 },
    { x: [1, 2, 17], w: [4, 2, 3], stride: 2, padding: 3, dilation: 2, groups: 1 },
    { x: [1, 6, 29], w: [9, 2, 3], stride: 3, padding: 0, dilation: 3, groups: 3 },
  ];

  it.each(devices)('convTranspose1d is the adjoint of conv1d: <conv1d(x, w), y> = <x, convTranspose1d(y, w)> (%s)', async (device) => {
    for (const c of ADJOINT) {
      const [n, , l] = c.x;
      const [o, , k] = c.w;
      const lout = Math.floor((l + 2 * c.padding - c.dilation * (k - 1) - 1) / c.stride) + 1;
      // The input lengths a strided conv maps to lout differ by up to stride - 1: outputPadding picks l.
      const outputPadding = (l + 2 * c.padding - c.dilation * (k - 1) - 1) % c.stride;
      const on = await Promise.all([randomTensor(c.x), randomTensor(c.w), randomTensor([n, o, lout])].map((t) => t.to(device)));
      const [x, w, y] = on;
      const cx = tg.conv1d(x, w, undefined, { stride: c.stride, padding: c.padding, dilation: c.dilation, groups: c.groups });
      const ty = tg.convTranspose1d(y, w, undefined, { stride: c.stride, padding: c.padding, dilation: c.dilation, groups: c.groups, outputPadding });
      expect(cx.shape).toEqual(y.shape);
      expect(ty.shape).toEqual(x.shape);
      const dot = async (a: Tensor, b: Tensor) => {
        const [av, bv] = [await valuesOf(a), await valuesOf(b)];
        let s = 0;
        let mag = 0;
        av.forEach((v, i) => {
          s += v * bv[i];
          mag += Math.abs(v * bv[i]);
        });
        return { s, mag };
      };
      const lhs = await dot(cx, y);
      const rhs = await dot(x, ty);
      // Both sides round each output element to f32 once: the gap is a few f32 ulps of the sum of |terms|.
      expect(Math.abs(lhs.s - rhs.s), JSON.stringify(c)).toBeLessThan(1e-5 * lhs.mag);
      [...on, cx, ty].forEach((t) => t.dispose());
    }
  });

  it('unbatched input equals the batch of one', async () => {
    const x = randomTensor([3, 12]);
    const w = randomTensor([6, 1, 3]);
    const a = tg.conv1d(x, w, undefined, { groups: 3, stride: 2, padding: 1 });
    const bb = tg.conv1d(x.reshape(1, 3, 12), w, undefined, { groups: 3, stride: 2, padding: 1 });
    expect(a.shape).toEqual([6, 6]);
    expectClose(await a.toArray(), await bb.toArray(), { atol: 0, rtol: 0 });
    const wt = randomTensor([3, 2, 3]);
    const ta = tg.convTranspose1d(x, wt, undefined, { stride: 2, groups: 3 });
    const tb = tg.convTranspose1d(x.reshape(1, 3, 12), wt, undefined, { stride: 2, groups: 3 });
    expect(ta.shape).toEqual([6, 25]);
    expectClose(await ta.toArray(), await tb.toArray(), { atol: 0, rtol: 0 });
    [x, w, a, bb, wt, ta, tb].forEach((t) => t.dispose());
  });
});

describe('conv1d / convTranspose1d errors', () => {
  const x = randomTensor([1, 4, 9]);
  const w = randomTensor([6, 4, 3]);
  const wt = randomTensor([4, 3, 3]);

  it('conv1d: typed errors name the offending shapes and values', () => {
    expect(() => tg.conv1d(x.reshape(1, 1, 4, 9), w)).toThrow(/\[N, C, L\] or \[C, L\]/);
    expect(() => tg.conv1d(x.reshape(36), w)).toThrow(ShapeError);
    expect(() => tg.conv1d(x, w.reshape(6, 12))).toThrow(/weight must be \[O, C \/ groups, k\]/);
    expect(() => tg.conv1d(x, randomTensor([6, 3, 3]))).toThrow(/takes 3 channels per group.*4 channels/);
    expect(() => tg.conv1d(x, randomTensor([6, 1, 3]), undefined, { groups: 3 })).toThrow(/multiples of groups 3/);
    expect(() => tg.conv1d(x, randomTensor([5, 2, 3]), undefined, { groups: 2 })).toThrow(/multiples of groups 2/);
    expect(() => tg.conv1d(x, w, undefined, { groups: 0 })).toThrow(/groups must be an integer >= 1/);
    expect(() => tg.conv1d(x, w, randomTensor([5]))).toThrow(/bias must be \[6\]/);
    expect(() => tg.conv1d(x, randomTensor([6, 4, 11]))).toThrow(/smaller than the dilated kernel span 11/);
    expect(() => tg.conv1d(x, w, undefined, { dilation: 5 })).toThrow(/span 11/);
    expect(() => tg.conv1d(x, w, undefined, { stride: 0 })).toThrow(/stride/);
    expect(() => tg.conv1d(x, w, undefined, { padding: -1 })).toThrow(/padding/);
    expect(() => tg.conv1d(x, w, undefined, { padding: [1, -1] })).toThrow(/padding/);
    expect(() => tg.conv1d(x, w, undefined, { padding: 'same', stride: 2 })).toThrow(/'same' needs stride 1/);
    expect(() => tg.conv1d(x.to('int32'), w)).toThrow(DTypeError);
    expect(() => tg.conv1d(x, w.to('float8_e4m3fn'))).toThrow(DTypeError);
    // 'causal' is conv1d's: conv2d keeps its own padding forms.
    expect(() => tg.conv2d(x.reshape(1, 4, 1, 9), w.reshape(6, 4, 1, 3), undefined, { padding: 'causal' as 'same' })).toThrow(/'causal' is conv1d's/);
  });

  it('convTranspose1d: typed errors name the offending shapes and values', () => {
    expect(() => tg.convTranspose1d(x.reshape(1, 1, 4, 9), wt)).toThrow(/\[N, C, L\] or \[C, L\]/);
    expect(() => tg.convTranspose1d(x, wt.reshape(4, 9))).toThrow(/weight must be \[C, O \/ groups, k\]/);
    expect(() => tg.convTranspose1d(x, randomTensor([3, 3, 3]))).toThrow(/x's 4 channels first/);
    expect(() => tg.convTranspose1d(x, wt, undefined, { groups: 3 })).toThrow(/4 input channels must be a multiple of groups 3/);
    expect(() => tg.convTranspose1d(x, wt, undefined, { groups: 1.5 })).toThrow(/groups must be an integer/);
    expect(() => tg.convTranspose1d(x, wt, randomTensor([6]), { groups: 1 })).toThrow(/bias must be \[3\]/);
    expect(() => tg.convTranspose1d(x, wt, randomTensor([3]), { groups: 2 })).toThrow(/bias must be \[6\]/);
    expect(() => tg.convTranspose1d(x, wt, undefined, { outputPadding: 1 })).toThrow(/outputPadding 1 must be smaller than stride 1 or dilation 1/);
    expect(() => tg.convTranspose1d(x, wt, undefined, { stride: 2, dilation: 3, outputPadding: 3 })).toThrow(/outputPadding 3/);
    expect(() => tg.convTranspose1d(x, wt, undefined, { stride: 2, dilation: 3, outputPadding: 2 })).not.toThrow();
    expect(() => tg.convTranspose1d(x, wt, undefined, { stride: 0 })).toThrow(/stride/);
    expect(() => tg.convTranspose1d(x, wt, undefined, { padding: -1 })).toThrow(/padding/);
    expect(() => tg.convTranspose1d(x, wt, undefined, { padding: 6 })).toThrow(/= -1 is too small/);
    expect(() => tg.convTranspose1d(randomTensor([1, 4, 0]), wt)).toThrow(/empty length dim/);
    expect(() => tg.convTranspose1d(x.to('int32'), wt)).toThrow(DTypeError);
    expect(() => tg.convTranspose1d(x, wt, randomTensor([3], 'int32'))).toThrow(DTypeError);
  });
});
