// conv2d / conv3d and pad on WebGPU against the CPU backend, on seeded random inputs: strides 1 and 2, dilation 2,
// groups 1 / 2 / C (depthwise), kernels 1 and 3, causal temporal padding, asymmetric and 'same' padding, odd sizes,
// bias on and off, strided views, f32/f16/bf16 activations with weights of another dtype. Independent checks pin the
// definitions apart from the CPU reference: a hand-computed causal conv3d, conv2d against im2col built here on the
// host + matmul, and hand-written pads. Dispatch counts: exactly one per conv (padding and bias included) and per
// pad. Pad covers every mode at ranks 1..5, cropping, the H*W = 65536 / 65540 temporal pads of 5-D tensors (the
// PyTorch MPS bug), and empty tensors; errors are typed.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { DTypeError, setDefaultDevice, ShapeError, type DType, type Tensor } from '../../src/index.js';
import { BITS, checkBoth, expectClose, randomTensor, type Tolerance } from '../helpers/compare.js';
import { dispatchesOf, setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

type Float = 'float32' | 'float16' | 'bfloat16';

/**
 * GPU (f32 fma accumulation) vs CPU (f64), both rounded once to x's dtype. Sums here have up to ~110 products of
 * standard normals (results up to ~30): f32 error stays below ~1e-5 absolute. Narrow outputs may round the two
 * sums to neighbouring values: 1 ulp (2^-10 f16, 2^-7 bf16 relative) plus the f32 slack for results near zero.
 */
function tol(dtype: Float): Tolerance {
  if (dtype === 'float32') return { atol: 5e-5, rtol: 2e-5 };
  return { atol: 1e-4, rtol: (dtype === 'float16' ? 2 ** -10 : 2 ** -7) * 1.05 };
}

const cpuTensor = (values: number[], shape: number[], dtype: DType = 'float32') => tg.tensor(values, { shape, dtype });

interface ConvCase {
  label: string;
  x: number[];
  w: number[];
  bias: boolean;
  options: tg.ConvOptions;
}

const CONV2D: ConvCase[] = [
  { label: '3x3 stride 1 pad 1', x: [2, 4, 7, 9], w: [6, 4, 3, 3], bias: true, options: { padding: 1 } },
  { label: '3x3 stride 2 pad 1, odd sizes', x: [1, 3, 9, 11], w: [5, 3, 3, 3], bias: false, options: { stride: 2, padding: 1 } },
  { label: '3x3 dilation 2 pad 2', x: [1, 4, 8, 7], w: [3, 4, 3, 3], bias: true, options: { dilation: 2, padding: 2 } },
  { label: 'groups 2', x: [2, 4, 6, 5], w: [6, 2, 3, 3], bias: true, options: { groups: 2, padding: 1 } },
  { label: 'depthwise (groups = C)', x: [1, 5, 7, 6], w: [5, 1, 3, 3], bias: false, options: { groups: 5, padding: 1 } },
  { label: 'depthwise with multiplier 2', x: [1, 3, 5, 5], w: [6, 1, 3, 3], bias: true, options: { groups: 3, padding: [1, 0] } },
  { label: '1x1', x: [2, 6, 5, 3], w: [4, 6, 1, 1], bias: true, options: {} },
  {
    label: 'asymmetric padding, stride [2, 1]',
    x: [1, 3, 6, 7],
    w: [2, 3, 3, 2],
    bias: true,
    options: {
      stride: [2, 1],
      padding: [
        [0, 2],
        [1, 0],
      ],
    },
  },
  { label: "'same' with even kernel and dilation", x: [1, 2, 6, 5], w: [3, 2, 2, 4], bias: false, options: { padding: 'same', dilation: [2, 1] } },
];

const CONV3D: ConvCase[] = [
  {
    label: 'causal 3x3x3',
    x: [1, 4, 5, 6, 7],
    w: [3, 4, 3, 3, 3],
    bias: true,
    options: {
      padding: [
        [2, 0],
        [1, 1],
        [1, 1],
      ],
    },
  },
  {
    label: 'causal 3x3x3, stride [1, 2, 2]',
    x: [2, 3, 4, 7, 5],
    w: [4, 3, 3, 3, 3],
    bias: false,
    options: {
      stride: [1, 2, 2],
      padding: [
        [2, 0],
        [1, 1],
        [1, 1],
      ],
    },
  },
  { label: 'temporal stride 2 (time downsample), kernel [3, 1, 1]', x: [1, 4, 7, 3, 4], w: [4, 4, 3, 1, 1], bias: true, options: { stride: [2, 1, 1] } },
  { label: 'kt 1 (a 2-D kernel per frame)', x: [1, 4, 3, 5, 6], w: [5, 4, 1, 3, 3], bias: true, options: { padding: [0, 1, 1] } },
  {
    label: 'groups 2, dilation [1, 2, 2]',
    x: [1, 4, 4, 7, 7],
    w: [4, 2, 3, 3, 3],
    bias: true,
    options: {
      groups: 2,
      dilation: [1, 2, 2],
      padding: [
        [2, 0],
        [2, 2],
        [2, 2],
      ],
    },
  },
  {
    label: 'temporal dilation 2, causal',
    x: [1, 3, 7, 4, 4],
    w: [2, 3, 3, 3, 3],
    bias: true,
    options: {
      dilation: [2, 1, 1],
      padding: [
        [4, 0],
        [1, 1],
        [1, 1],
      ],
    },
  },
  {
    label: 'depthwise causal',
    x: [1, 3, 5, 4, 5],
    w: [3, 1, 3, 3, 3],
    bias: false,
    options: {
      groups: 3,
      padding: [
        [2, 0],
        [1, 1],
        [1, 1],
      ],
    },
  },
  { label: '1x1x1', x: [2, 5, 3, 4, 3], w: [7, 5, 1, 1, 1], bias: true, options: {} },
];

async function checkConv(c: ConvCase, xDtype: Float, wDtype: Float): Promise<void> {
  const op = c.x.length === 4 ? tg.conv2d : tg.conv3d;
  const x = randomTensor(c.x, xDtype);
  const w = randomTensor(c.w, wDtype);
  const b = randomTensor([c.w[0]], wDtype);
  try {
    const inputs = c.bias ? [x, w, b] : [x, w];
    const r = await checkBoth(inputs, (xx, ww, bb) => op(xx, ww, bb, c.options), tol(xDtype), `${c.label} x ${xDtype} w ${wDtype}`);
    expect(r.dtype).toBe(xDtype);
  } finally {
    [x, w, b].forEach((t) => t.dispose());
  }
}

describe.skipIf(!gpu.available)(`conv2d / conv3d, WebGPU vs CPU ${gpu.skipReason}`, () => {
  it.each(CONV2D.map((c) => [c.label, c] as const))('conv2d %s (f32)', async (_, c) => {
    await checkConv(c, 'float32', 'float32');
  });

  it.each(CONV3D.map((c) => [c.label, c] as const))('conv3d %s (f32)', async (_, c) => {
    await checkConv(c, 'float32', 'float32');
  });

  it('mixed and narrow dtypes: bf16 weights with f32 x, f16 and bf16 x (odd output counts: half-filled words)', async () => {
    const pairs: [Float, Float][] = [
      ['float32', 'bfloat16'],
      ['float16', 'float16'],
      ['bfloat16', 'bfloat16'],
      ['bfloat16', 'float32'],
      ['float16', 'bfloat16'],
    ];
    for (const [xd, wd] of pairs) {
      await checkConv(CONV2D[1], xd, wd);
      await checkConv(CONV3D[0], xd, wd);
    }
    await checkConv(CONV2D[4], 'float16', 'float16');
    await checkConv(CONV3D[4], 'bfloat16', 'float32');
  });

  it('strided views are read in place: transposed x, sliced x at odd element offsets, permuted weight, strided bias', async () => {
    // x stored [N, C, W, H] and transposed; weight stored [O, kh, kw, C] and permuted; bias every other element.
    const xt = randomTensor([2, 3, 9, 8]);
    const wt = randomTensor([4, 3, 3, 3]);
    const b2 = randomTensor([8]);
    await checkBoth(
      [xt, wt, b2],
      (x, w, b) => tg.conv2d(x.transpose(2, 3), w.permute(0, 3, 1, 2), b.slice(0, 0, 8, 2), { padding: 1, stride: 2 }),
      tol('float32'),
      'transposed',
    );
    for (const dtype of ['float16', 'bfloat16'] as const) {
      const x = randomTensor([1, 3, 5, 6, 9], dtype);
      const w = randomTensor([2, 3, 3, 3, 3], dtype);
      await checkBoth(
        [x, w],
        (a, ww) =>
          tg.conv3d(a.slice(4, 1, 8), ww, undefined, {
            padding: [
              [2, 0],
              [1, 1],
              [1, 1],
            ],
          }),
        tol(dtype),
        `${dtype} sliced`,
      );
      [x, w].forEach((t) => t.dispose());
    }
    [xt, wt, b2].forEach((t) => t.dispose());
  });

  it('one dispatch per conv: padding (symmetric, causal) and bias add none', async () => {
    const x2 = randomTensor([1, 4, 9, 7]);
    const w2 = randomTensor([3, 4, 3, 3]);
    const x3 = randomTensor([1, 4, 5, 6, 7]);
    const w3 = randomTensor([3, 4, 3, 3, 3]);
    const b = randomTensor([3], 'bfloat16');
    expect(await dispatchesOf([x2, w2, b], (x, w, bb) => tg.conv2d(x, w, bb, { padding: 1, stride: 2 }))).toBe(1);
    expect(
      await dispatchesOf([x3, w3, b], (x, w, bb) =>
        tg.conv3d(x, w, bb, {
          padding: [
            [2, 0],
            [1, 1],
            [1, 1],
          ],
        }),
      ),
    ).toBe(1);
    expect(await dispatchesOf([x3, w3], (x, w) => tg.conv3d(x.to('float16'), w, undefined, { padding: 'same' }).to('float32'))).toBe(3);
    [x2, w2, x3, w3, b].forEach((t) => t.dispose());
  });

  it('empty batch and zero output channels give empty results', async () => {
    const x = randomTensor([0, 3, 5, 5]);
    const w = randomTensor([4, 3, 3, 3]);
    const r = await checkBoth([x, w], (a, b) => tg.conv2d(a, b, undefined, { padding: 1 }), tol('float32'));
    expect(r.shape).toEqual([0, 4, 5, 5]);
    const x1 = randomTensor([1, 3, 2, 5, 5]);
    const w0 = randomTensor([0, 3, 1, 3, 3]);
    const r0 = await checkBoth([x1, w0], (a, b) => tg.conv3d(a, b), tol('float32'));
    expect(r0.shape).toEqual([1, 0, 2, 3, 3]);
    [x, w, x1, w0].forEach((t) => t.dispose());
  });
});

describe('conv definitions, pinned apart from the CPU reference', () => {
  const devices = gpu.available ? (['cpu', 'webgpu'] as const) : (['cpu'] as const);

  it.each(devices)('causal conv3d by hand (%s): out[t] = sum_i w[i] x[t - 2 + i], nothing read behind', async (device) => {
    const x = await cpuTensor([1, 2, 3], [1, 1, 3, 1, 1]).to(device);
    const w = await cpuTensor([1, 10, 100], [1, 1, 3, 1, 1]).to(device);
    const b = await cpuTensor([0.5], [1]).to(device);
    const r = tg.conv3d(x, w, b, {
      padding: [
        [2, 0],
        [0, 0],
        [0, 0],
      ],
    });
    expect(r.shape).toEqual([1, 1, 3, 1, 1]);
    expect(Array.from(await r.toArray())).toEqual([100.5, 210.5, 321.5]);
    [x, w, b, r].forEach((t) => t.dispose());
  });

  it.each(devices)('conv2d equals im2col (built on the host) @ weight^T + bias (%s)', async (device) => {
    const [n, c, h, wd, o, k, s, pd] = [2, 3, 6, 7, 4, 3, 2, 1];
    const x = randomTensor([n, c, h, wd]);
    const w = randomTensor([o, c, k, k]);
    const b = randomTensor([o]);
    const xs = Array.from(await x.toArray());
    const ho = Math.floor((h + 2 * pd - k) / s) + 1;
    const wo = Math.floor((wd + 2 * pd - k) / s) + 1;
    // cols[(n, i, j), (c, a, bb)] = x[n, c, i*s - pd + a, j*s - pd + bb], 0 outside.
    const cols: number[] = [];
    for (let ni = 0; ni < n; ni++)
      for (let i = 0; i < ho; i++)
        for (let j = 0; j < wo; j++)
          for (let ci = 0; ci < c; ci++)
            for (let a = 0; a < k; a++)
              for (let bb = 0; bb < k; bb++) {
                const y = i * s - pd + a;
                const z = j * s - pd + bb;
                cols.push(y >= 0 && y < h && z >= 0 && z < wd ? xs[((ni * c + ci) * h + y) * wd + z] : 0);
              }
    const on = await Promise.all([x, w, b, cpuTensor(cols, [n * ho * wo, c * k * k])].map((t) => t.to(device)));
    const [gx, gw, gb, gcols] = on;
    const want = gcols
      .matmul(gw.reshape(o, c * k * k).T)
      .add(gb)
      .reshape(n, ho, wo, o)
      .permute(0, 3, 1, 2)
      .contiguous();
    const got = tg.conv2d(gx, gw, gb, { stride: s, padding: pd });
    expect(got.shape).toEqual([n, o, ho, wo]);
    expectClose(await got.toArray(), await want.toArray(), tol('float32'), 'conv2d vs im2col');
    [x, w, b, ...on, want, got].forEach((t) => t.dispose());
  });
});

describe('conv errors', () => {
  const x = randomTensor([1, 4, 5, 5]);
  const w = randomTensor([6, 4, 3, 3]);
  it('typed errors name the offending shapes and values', () => {
    expect(() => tg.conv2d(x.reshape(4, 5, 5), w)).toThrow(ShapeError);
    expect(() => tg.conv2d(x, randomTensor([6, 3, 3, 3]))).toThrow(/takes 3 channels per group.*4 channels/);
    expect(() => tg.conv2d(x, randomTensor([6, 3, 3, 3]), undefined, { groups: 3 })).toThrow(/multiples of groups 3/);
    expect(() => tg.conv2d(x, randomTensor([5, 2, 3, 3]), undefined, { groups: 2 })).toThrow(/multiples of groups 2/);
    expect(() => tg.conv2d(x, w, randomTensor([5]))).toThrow(/bias must be \[6\]/);
    expect(() => tg.conv2d(x, randomTensor([6, 4, 7, 3]))).toThrow(/smaller than the dilated kernel span 7/);
    expect(() => tg.conv2d(x, w, undefined, { dilation: 3 })).toThrow(ShapeError);
    expect(() => tg.conv2d(x, w, undefined, { stride: 0 })).toThrow(/stride/);
    expect(() => tg.conv2d(x, w, undefined, { stride: [1, 2, 3] })).toThrow(/stride/);
    expect(() => tg.conv2d(x, w, undefined, { padding: -1 })).toThrow(/padding/);
    expect(() => tg.conv2d(x, w, undefined, { padding: [[1, 2, 3] as unknown as [number, number], 1] })).toThrow(/padding/);
    expect(() => tg.conv2d(x, w, undefined, { padding: 'same', stride: 2 })).toThrow(/'same' needs stride 1/);
    expect(() => tg.conv3d(x, w)).toThrow(/\[N, C, T, H, W\]/);
    expect(() => tg.conv2d(x.to('int32'), w)).toThrow(DTypeError);
    expect(() => tg.conv2d(x, w.to('float8_e4m3fn'))).toThrow(DTypeError);
  });
});

// ---- pad ----------------------------------------------------------------------------------------------------------

interface PadCase {
  shape: number[];
  pads: number[];
}

const PAD_CASES: PadCase[] = [
  { shape: [7], pads: [2, 3] },
  { shape: [5, 6], pads: [1, 2, 3, 0] },
  { shape: [3, 4, 5], pads: [2, 2] },
  { shape: [2, 3, 4, 5], pads: [1, 1, 2, 3] },
  { shape: [1, 2, 3, 4, 5], pads: [1, 1, 1, 1, 2, 0] },
  { shape: [2, 3, 3, 4, 3], pads: [0, 2, 3, 0, 0, 1, 1, 0] },
];

describe.skipIf(!gpu.available)(`pad, WebGPU vs CPU ${gpu.skipReason}`, () => {
  it.each(PAD_CASES.map((c) => [c.shape.length, c.shape, c.pads, c] as const))('rank %i %j pads %j, every mode, f32/f16/int32/uint8', async (_r, _s, _p, c) => {
    for (const dtype of ['float32', 'float16', 'int32', 'uint8'] as const) {
      const x = randomTensor(c.shape, dtype);
      await checkBoth([x], (a) => tg.pad(a, c.pads, { value: 3 }), BITS, `constant ${dtype}`);
      await checkBoth([x], (a) => tg.pad(a, c.pads, { mode: 'replicate' }), BITS, `replicate ${dtype}`);
      await checkBoth([x], (a) => tg.pad(a, c.pads, { mode: 'reflect' }), BITS, `reflect ${dtype}`);
      x.dispose();
    }
  });

  it('cropping (negative constant pads), strided and offset views, bf16 / fp8 / bool codes', async () => {
    const x = randomTensor([4, 6, 7]);
    await checkBoth([x], (a) => tg.pad(a, [-2, 1, 1, -3, -1, 0]), BITS, 'crop');
    await checkBoth([x], (a) => tg.pad(a, [-7, 2]), BITS, 'crop to nothing, then pad');
    await checkBoth([x], (a) => tg.pad(a.transpose(0, 2).slice(1, 1, 6, 2), [2, 1, 1, 2], { mode: 'reflect' }), BITS, 'strided reflect');
    for (const dtype of ['bfloat16', 'float8_e4m3fn', 'bool'] as const) {
      const y = randomTensor([3, 5, 5], dtype);
      await checkBoth([y], (a) => tg.pad(a.slice(2, 1), [1, 2, 2, 1], { mode: 'replicate' }), BITS, `${dtype} replicate`);
      await checkBoth([y], (a) => tg.pad(a, [3, 1], { value: 1 }), BITS, `${dtype} constant`);
      y.dispose();
    }
    x.dispose();
  });

  it.each([
    [256, 256],
    [145, 452],
  ])('5-D temporal pad with H*W = %i*%i (>= 65536), every mode, one dispatch', async (h, w) => {
    const x = randomTensor([1, 2, 3, h, w]);
    // (front, back) on T only: the VAE's causal pad, and the shape that corrupted MPS encodes.
    for (const opts of [{ value: -1 }, { mode: 'replicate' as const }, { mode: 'reflect' as const }]) {
      const r = await checkBoth([x], (a) => tg.pad(a, [0, 0, 0, 0, 2, 1], opts), BITS, `${h}x${w} ${JSON.stringify(opts)}`);
      expect(r.shape).toEqual([1, 2, 6, h, w]);
      // Spot-check against the definition too: frame 2 is input frame 0, and the last pixel of each frame is right.
      const hw = h * w;
      const xs = await x.toArray();
      for (let ch = 0; ch < 2; ch++) {
        for (const e of [0, hw - 1, 65535 % hw, hw - 2]) expect(r.gpu[(ch * 6 + 2) * hw + e]).toBe(xs[ch * 3 * hw + e]);
      }
    }
    const f16 = randomTensor([1, 1, 2, h, w], 'float16');
    await checkBoth([f16], (a) => tg.pad(a, [1, 1, 1, 0, 2, 0], { mode: 'replicate' }), BITS, `${h}x${w} f16 replicate, all dims`);
    expect(await dispatchesOf([x], (a) => tg.pad(a, [0, 0, 0, 0, 2, 0]))).toBe(1);
    [x, f16].forEach((t) => t.dispose());
  });

  it('empty tensors and empty pads', async () => {
    const e = randomTensor([0, 3]);
    const r = await checkBoth([e], (a) => tg.pad(a, [1, 1]), BITS);
    expect(r.shape).toEqual([0, 5]);
    const z = randomTensor([2, 0]);
    const filled = await checkBoth([z], (a) => tg.pad(a, [1, 1], { value: 7 }), BITS);
    expect(Array.from(filled.gpu)).toEqual([7, 7, 7, 7]);
    const x = randomTensor([2, 3]);
    await checkBoth([x], (a) => tg.pad(a, []), BITS, 'no pads: a copy');
    const s = randomTensor([]);
    await checkBoth([s], (a) => tg.pad(a, []), BITS, '0-d');
    [e, z, x, s].forEach((t) => t.dispose());
  });
});

describe('pad definitions and errors', () => {
  const devices = gpu.available ? (['cpu', 'webgpu'] as const) : (['cpu'] as const);
  it.each(devices)('hand-written 1-D and 2-D pads (%s)', async (device) => {
    const x = await cpuTensor([1, 2, 3], [3]).to(device);
    const at = async (t: Tensor) => Array.from(await t.toArray());
    expect(await at(tg.pad(x, [2, 1], { value: 9 }))).toEqual([9, 9, 1, 2, 3, 9]);
    expect(await at(tg.pad(x, [2, 1], { mode: 'replicate' }))).toEqual([1, 1, 1, 2, 3, 3]);
    expect(await at(tg.pad(x, [2, 1], { mode: 'reflect' }))).toEqual([3, 2, 1, 2, 3, 2]);
    expect(await at(tg.pad(x, [-1, 1]))).toEqual([2, 3, 0]);
    const m = await cpuTensor([1, 2, 3, 4], [2, 2]).to(device);
    // torch: F.pad(m, (1, 0, 0, 1), mode='reflect') on [[1, 2], [3, 4]] -> [[2, 1, 2], [4, 3, 4], [2, 1, 2]].
    expect(await at(tg.pad(m, [1, 0, 0, 1], { mode: 'reflect' }))).toEqual([2, 1, 2, 4, 3, 4, 2, 1, 2]);
    x.dispose();
    m.dispose();
  });

  it('typed errors', () => {
    const x = randomTensor([2, 3, 4]);
    expect(() => tg.pad(x, [1])).toThrow(ShapeError);
    expect(() => tg.pad(x, [1, 1, 1, 1, 1, 1, 1, 1])).toThrow(/at most 3 dims/);
    expect(() => tg.pad(x, [4, 0], { mode: 'reflect' })).toThrow(/smaller than its size 4/);
    expect(() => tg.pad(x, [0, 0, 0, 3], { mode: 'reflect' })).toThrow(/smaller than its size 3/);
    expect(() => tg.pad(x, [-1, 0], { mode: 'replicate' })).toThrow(/only constant mode/);
    expect(() => tg.pad(x, [-3, -2])).toThrow(/negative size -1/);
    expect(() => tg.pad(x, [0.5, 1])).toThrow(/integers/);
    expect(() => tg.pad(randomTensor([2, 0]), [1, 1], { mode: 'replicate' })).toThrow(/empty dim/);
    expect(() => tg.pad(x, [1, 1], { mode: 'reflect', value: 2 })).toThrow(RangeError);
    expect(() => tg.pad(x, [1, 1], { mode: 'wrap' as 'constant' })).toThrow(/unknown mode/);
  });
});

// ---- conv3d with previous frames (a causal conv's frame cache) -----------------------------------------------------

interface PreviousCase {
  label: string;
  x: number[];
  w: number[];
  /** Frames of previous. */
  frames: number;
  options: tg.ConvOptions;
  xDtype?: Float;
  prevDtype?: Float;
  /** previous as a view: built from a random tensor of this shape by `view` (default: prev itself, contiguous). */
  source?: number[];
  view?: (t: Tensor) => Tensor;
}

const CAUSAL: tg.ConvOptions = {
  padding: [
    [2, 0],
    [1, 1],
    [1, 1],
  ],
};
const TIME_DOWN: tg.ConvOptions = {
  padding: [
    [1, 0],
    [0, 0],
    [0, 0],
  ],
  stride: [2, 1, 1],
};

const PREVIOUS: PreviousCase[] = [
  { label: 'causal 3x3x3, P = 2 (no temporal zeros left)', x: [1, 4, 3, 5, 6], w: [5, 4, 3, 3, 3], frames: 2, options: CAUSAL },
  { label: 'causal 3x3x3, P = 1 (one zero frame left)', x: [2, 3, 4, 4, 5], w: [8, 3, 3, 3, 3], frames: 1, options: CAUSAL },
  {
    label: 'time downsample 3x1x1 stride 2, P = 1 (diffusers time_conv on cat(cache[-1:], x))',
    x: [1, 4, 5, 3, 4],
    w: [4, 4, 3, 1, 1],
    frames: 1,
    options: TIME_DOWN,
  },
  { label: 'time downsample 3x1x1 stride 2, even T, P = 1', x: [1, 6, 4, 2, 3], w: [13, 6, 3, 1, 1], frames: 1, options: TIME_DOWN },
  {
    label: 'strided previous: the last 2 frames of an earlier chunk, transposed in H/W storage',
    x: [1, 4, 3, 5, 6],
    w: [5, 4, 3, 3, 3],
    frames: 2,
    options: CAUSAL,
    source: [1, 4, 5, 6, 5],
    view: (t) => t.slice(2, 3, 5).transpose(3, 4),
  },
  { label: 'bf16 previous with f32 x', x: [1, 4, 3, 5, 6], w: [9, 4, 3, 3, 3], frames: 2, options: CAUSAL, prevDtype: 'bfloat16' },
  {
    label: 'f16 x and previous (packed output words)',
    x: [1, 3, 3, 5, 5],
    w: [5, 3, 3, 3, 3],
    frames: 2,
    options: CAUSAL,
    xDtype: 'float16',
    prevDtype: 'float16',
  },
  {
    label: 'groups 2, temporal dilation 2, P = 3 of 4 zeros',
    x: [1, 4, 3, 4, 5],
    w: [10, 2, 3, 3, 3],
    frames: 3,
    options: {
      groups: 2,
      dilation: [2, 1, 1],
      padding: [
        [4, 0],
        [1, 1],
        [1, 1],
      ],
    },
  },
  { label: 'O = 3 (too few channels for a block), P = 2', x: [1, 4, 3, 4, 4], w: [3, 4, 3, 3, 3], frames: 2, options: CAUSAL },
];

/** Padding with P fewer zeros before T: the oracle's padding for cat(previous, x). */
function reducedPadding(options: tg.ConvOptions, frames: number): tg.ConvOptions {
  const pads = options.padding as (readonly [number, number])[];
  return { ...options, previous: undefined, padding: [[pads[0][0] - frames, pads[0][1]], pads[1], pads[2]] };
}

describe.skipIf(!gpu.available)(`conv3d previous frames, WebGPU vs CPU ${gpu.skipReason}`, () => {
  it.each(PREVIOUS.map((c) => [c.label, c] as const))('%s', async (_, c) => {
    const xDtype = c.xDtype ?? 'float32';
    const prevDtype = c.prevDtype ?? 'float32';
    const x = randomTensor(c.x, xDtype);
    const w = randomTensor(c.w);
    const b = randomTensor([c.w[0]]);
    const source = randomTensor(c.source ?? [c.x[0], c.x[1], c.frames, c.x[3], c.x[4]], prevDtype);
    const view = c.view ?? ((t: Tensor) => t);
    const run = (xx: Tensor, ww: Tensor, bb: Tensor, ss: Tensor) => tg.conv3d(xx, ww, bb, { ...c.options, previous: view(ss) });
    try {
      expect(view(source).shape).toEqual([c.x[0], c.x[1], c.frames, c.x[3], c.x[4]]);
      // Oracle: conv3d (CPU) on cat(previous, x) along T with the padding before T reduced by P. Converting a bf16
      // previous to x's f32 is exact.
      const catted = tg.cat([view(source).to(xDtype), x], 2);
      const want = tg.conv3d(catted, w, b, reducedPadding(c.options, c.frames));
      const plain = tg.conv3d(x, w, b, c.options);
      const r = await checkBoth([x, w, b, source], run, tol(xDtype), c.label);
      expect(r.shape).toEqual(want.shape);
      expect(r.shape).toEqual(plain.shape);
      const wanted = await want.toArray();
      expectClose(r.cpu, wanted, BITS, `${c.label}: CPU previous vs CPU cat`);
      expectClose(r.gpu, wanted, tol(xDtype), `${c.label}: GPU previous vs CPU cat`);
      // The previous frames matter: without them the first outputs differ.
      expect(Array.from(await plain.toArray()).some((v, i) => v !== wanted[i])).toBe(true);
      [catted, want, plain].forEach((t) => t.dispose());
    } finally {
      [x, w, b, source].forEach((t) => t.dispose());
    }
  });

  it('P = 0 (or an empty previous) is the plain conv; one dispatch with previous, no copies', async () => {
    const x = randomTensor([1, 4, 3, 5, 6]);
    const w = randomTensor([5, 4, 3, 3, 3]);
    const empty = randomTensor([1, 4, 0, 5, 6]);
    const plain = await checkBoth([x, w], (xx, ww) => tg.conv3d(xx, ww, undefined, CAUSAL), tol('float32'));
    const withEmpty = await checkBoth([x, w, empty], (xx, ww, ee) => tg.conv3d(xx, ww, undefined, { ...CAUSAL, previous: ee }), tol('float32'));
    expectClose(withEmpty.gpu, plain.gpu, BITS, 'empty previous');
    const prev = randomTensor([1, 4, 4, 6, 5], 'bfloat16');
    const b = randomTensor([5]);
    expect(await dispatchesOf([x, w, b, prev], (xx, ww, bb, pp) => tg.conv3d(xx, ww, bb, { ...CAUSAL, previous: pp.slice(2, 2, 4).transpose(3, 4) }))).toBe(1);
    expect(await dispatchesOf([x, w, prev], (xx, ww, pp) => tg.conv3d(xx, ww, undefined, { ...TIME_DOWN, previous: pp.slice(2, 3).transpose(3, 4) }))).toBe(1);
    [x, w, empty, prev, b].forEach((t) => t.dispose());
  });
});

describe('conv3d previous errors', () => {
  it('typed errors name the shapes', async () => {
    const x = randomTensor([1, 4, 3, 5, 6]);
    const w = randomTensor([5, 4, 3, 3, 3]);
    const prev = (shape: number[]) => ({ ...CAUSAL, previous: randomTensor(shape) });
    expect(() => tg.conv3d(x, w, undefined, prev([1, 4, 3, 5, 6]))).toThrow(
      /previous \[1, 4, 3, 5, 6\] has 3 frames but the temporal padding before x is only 2/,
    );
    expect(() => tg.conv3d(x, w, undefined, { padding: 1, previous: randomTensor([1, 4, 2, 5, 6]) })).toThrow(ShapeError);
    expect(() => tg.conv3d(x, w, undefined, prev([2, 4, 2, 5, 6]))).toThrow(/previous must be \[1, 4, P, 5, 6\].*\[2, 4, 2, 5, 6\]/);
    expect(() => tg.conv3d(x, w, undefined, prev([1, 3, 2, 5, 6]))).toThrow(ShapeError);
    expect(() => tg.conv3d(x, w, undefined, prev([1, 4, 2, 6, 5]))).toThrow(ShapeError);
    expect(() => tg.conv3d(x, w, undefined, prev([1, 4, 2, 5]))).toThrow(/previous must be/);
    expect(() => tg.conv3d(x, w, undefined, { ...CAUSAL, previous: randomTensor([1, 4, 2, 5, 6], 'int32') })).toThrow(DTypeError);
    const x2 = randomTensor([1, 4, 5, 6]);
    expect(() => tg.conv2d(x2, randomTensor([5, 4, 3, 3]), undefined, { padding: 1, previous: randomTensor([1, 4, 1, 5, 6]) })).toThrow(
      /conv2d: previous .* use conv3d/,
    );
    if (gpu.available) {
      const g = await randomTensor([1, 4, 2, 5, 6]).to('webgpu');
      expect(() => tg.conv3d(x, w, undefined, { ...CAUSAL, previous: g })).toThrow(/one device/);
      g.dispose();
    }
  });
});

// ---- the register-blocked kernel (float32 outputs: several output channels and columns per invocation) -------------

const BLOCKED: PreviousCase[] = [
  { label: 'O = 5 (one block of 4 overlapping the first), odd W', x: [1, 3, 2, 5, 7], w: [5, 3, 3, 3, 3], frames: 0, options: CAUSAL },
  { label: 'O = 13, Wo = 1 (a single column)', x: [1, 4, 3, 4, 1], w: [13, 4, 3, 3, 3], frames: 0, options: CAUSAL },
  { label: 'O = 33, bf16 weights, P = 2', x: [1, 5, 2, 4, 5], w: [33, 5, 3, 3, 3], frames: 2, options: CAUSAL },
  {
    label: 'groups 3 with 13 channels each, stride [1, 2, 2], asymmetric padding, P = 1',
    x: [2, 6, 3, 7, 9],
    w: [39, 2, 3, 3, 3],
    frames: 1,
    options: {
      groups: 3,
      stride: [1, 2, 2],
      padding: [
        [2, 1],
        [0, 2],
        [2, 1],
      ],
    },
  },
  {
    label: 'dilation [1, 2, 3], Wo = 3, O = 9',
    x: [1, 4, 2, 6, 9],
    w: [9, 4, 3, 3, 3],
    frames: 0,
    options: {
      dilation: [1, 2, 3],
      padding: [
        [2, 0],
        [2, 2],
        [0, 0],
      ],
    },
  },
  {
    label: 'stride 3 in W, width padding only after, O = 16',
    x: [1, 3, 3, 5, 11],
    w: [16, 3, 2, 3, 3],
    frames: 1,
    options: {
      stride: [2, 1, 3],
      padding: [
        [1, 0],
        [1, 1],
        [0, 2],
      ],
    },
  },
];

describe.skipIf(!gpu.available)(`conv blocked kernel, WebGPU vs CPU ${gpu.skipReason}`, () => {
  it.each(BLOCKED.map((c) => [c.label, c] as const))('conv3d %s', async (_, c) => {
    const x = randomTensor(c.x);
    const w = randomTensor(c.w, c.label.includes('bf16') ? 'bfloat16' : 'float32');
    const b = randomTensor([c.w[0]]);
    const prev = randomTensor([c.x[0], c.x[1], c.frames, c.x[3], c.x[4]]);
    try {
      await checkBoth([x, w, b], (xx, ww, bb) => tg.conv3d(xx, ww, bb, c.options), tol('float32'), `${c.label}, bias`);
      await checkBoth([x, w], (xx, ww) => tg.conv3d(xx, ww, undefined, c.options), tol('float32'), `${c.label}, no bias`);
      if (c.frames > 0) {
        const r = await checkBoth(
          [x, w, b, prev],
          (xx, ww, bb, pp) => tg.conv3d(xx, ww, bb, { ...c.options, previous: pp }),
          tol('float32'),
          `${c.label}, previous`,
        );
        const catted = tg.cat([prev, x], 2);
        const want = tg.conv3d(catted, w, b, reducedPadding(c.options, c.frames));
        expectClose(r.gpu, await want.toArray(), tol('float32'), `${c.label}: GPU previous vs CPU cat`);
        [catted, want].forEach((t) => t.dispose());
      }
    } finally {
      [x, w, b, prev].forEach((t) => t.dispose());
    }
  });

  it('conv2d with 24 channels, stride 2, and a transposed x', async () => {
    const x = randomTensor([1, 24, 9, 11]);
    const w = randomTensor([20, 24, 3, 3], 'bfloat16');
    const b = randomTensor([20]);
    await checkBoth([x, w, b], (xx, ww, bb) => tg.conv2d(xx.transpose(2, 3), ww, bb, { stride: 2, padding: 1 }), tol('float32'), 'conv2d 24 -> 20');
    [x, w, b].forEach((t) => t.dispose());
  });
});
