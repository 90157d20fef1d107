// groupNorm, channelRmsNorm and 2x upsample on WebGPU against the CPU backend, on seeded random inputs: f32/f16/bf16,
// odd sizes, 2- to 5-D inputs, weights/bias on and off and of another dtype, strided views, spatial sizes past
// 65536, empty batches. Independent checks pin the definitions apart from the CPU reference: group norm rebuilt
// from reshape + mean + elementwise ops, the channel RMS norm computed here on the host, bilinear 2x of a 2x2 input
// against torch's values written out by hand, nearest against index arithmetic. Dispatch counts: one per op, two
// only when a 16-bit output's rows would share packed words. Errors are typed.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { DTypeError, setDefaultDevice, ShapeError, type Tensor } from '../../src/index.js';
import { checkBoth, expectClose, randomTensor, type Tolerance } from '../helpers/compare.js';
import { dispatchesOf, setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

type Float = 'float32' | 'float16' | 'bfloat16';
const FLOATS: Float[] = ['float32', 'float16', 'bfloat16'];

/**
 * GPU (f32) vs CPU (f64), both rounded once to x's dtype. Normalized values are O(1..5); the f32 mean/variance of
 * up to ~130k elements (Kahan-summed) and the rsqrt leave ~1e-6 relative. Narrow outputs may round the two to
 * neighbouring values: 1 ulp (2^-10 f16, 2^-7 bf16 relative) plus slack for results near zero.
 */
function tol(dtype: Float): Tolerance {
  if (dtype === 'float32') return { atol: 5e-5, rtol: 5e-5 };
  return { atol: 2e-4, rtol: (dtype === 'float16' ? 2 ** -10 : 2 ** -7) * 1.05 };
}

async function withInputs(shapes: [number[], Float][], body: (...xs: Tensor[]) => Promise<void>): Promise<void> {
  const xs = shapes.map(([s, d]) => randomTensor(s, d));
  try {
    await body(...xs);
  } finally {
    xs.forEach((t) => t.dispose());
  }
}

describe.skipIf(!gpu.available)(`groupNorm, WebGPU vs CPU ${gpu.skipReason}`, () => {
  const CASES: { label: string; x: number[]; groups: number }[] = [
    { label: '4-D, odd sizes', x: [2, 6, 5, 7], groups: 3 },
    { label: '5-D, odd sizes', x: [1, 8, 3, 5, 3], groups: 4 },
    { label: '3-D', x: [2, 6, 9], groups: 2 },
    { label: '2-D (no spatial dims)', x: [3, 8], groups: 4 },
    { label: 'one group (layer norm over C x S)', x: [1, 5, 3, 3], groups: 1 },
    { label: 'groups = C (instance norm)', x: [2, 4, 3, 5], groups: 4 },
  ];
  it.each(CASES.map((c) => [c.label, c] as const))('%s: every dtype, affine on/off', async (_, c) => {
    for (const dtype of FLOATS) {
      await withInputs(
        [
          [c.x, dtype],
          [[c.x[1]], 'float32'],
          [[c.x[1]], 'bfloat16'],
        ],
        async (x, w, b) => {
          await checkBoth([x, w, b], (xx, ww, bb) => tg.groupNorm(xx, c.groups, ww, bb, 1e-5), tol(dtype), `${c.label} ${dtype} affine`);
          await checkBoth([x], (xx) => tg.groupNorm(xx, c.groups), tol(dtype), `${c.label} ${dtype} plain`);
          await checkBoth([x, w], (xx, ww) => tg.groupNorm(xx, c.groups, ww, undefined, 1e-3), tol(dtype), `${c.label} ${dtype} weight only`);
          await checkBoth([x, b], (xx, bb) => tg.groupNorm(xx, c.groups, undefined, bb), tol(dtype), `${c.label} ${dtype} bias only`);
        },
      );
    }
  });

  it('strided views read in place: transposed and sliced x, strided weight', async () => {
    await withInputs(
      [
        [[2, 6, 7, 5], 'float32'],
        [[12], 'float16'],
      ],
      async (x, w) => {
        await checkBoth([x, w], (xx, ww) => tg.groupNorm(xx.transpose(2, 3), 2, ww.slice(0, 0, 12, 2)), tol('float32'), 'transposed');
        await checkBoth([x], (xx) => tg.groupNorm(xx.slice(3, 1, 4), 3), tol('float32'), 'sliced');
      },
    );
  });

  it('a group of 2 x 66560 positions (H*W past 65536), f32 and f16, with a mean far from 0', async () => {
    for (const dtype of ['float32', 'float16'] as const) {
      const base = randomTensor([1, 4, 1, 256, 260], dtype);
      const x = tg.add(base, tg.full([1], 8, { dtype }));
      await checkBoth([x], (xx) => tg.groupNorm(xx, 2, undefined, undefined, 1e-6), tol(dtype), `large ${dtype}`);
      [base, x].forEach((t) => t.dispose());
    }
  });

  it('empty batch and empty spatial dims', async () => {
    await withInputs(
      [
        [[0, 4, 3, 5], 'float32'],
        [[2, 4, 0, 5], 'float16'],
      ],
      async (x, y) => {
        const r = await checkBoth([x], (xx) => tg.groupNorm(xx, 2), tol('float32'), 'N = 0');
        expect(r.shape).toEqual([0, 4, 3, 5]);
        await checkBoth([y], (yy) => tg.groupNorm(yy, 4), tol('float16'), 'H = 0');
      },
    );
  });

  it('matches reshape + mean + elementwise ops (independent of the CPU reference)', async () => {
    const [n, c, t, h, w, g] = [2, 6, 2, 3, 5, 3];
    await withInputs(
      [
        [[n, c, t, h, w], 'float32'],
        [[c], 'float32'],
        [[c], 'float32'],
      ],
      async (x, wt, b) => {
        const eps = 1e-5;
        const grouped = tg.reshape(x, [n, g, (c / g) * t * h * w]);
        const mean = tg.mean(grouped, 2, { keepdim: true });
        const centered = tg.sub(grouped, mean);
        const variance = tg.mean(tg.mul(centered, centered), 2, { keepdim: true });
        const normed = tg.reshape(tg.mul(centered, tg.rsqrt(tg.add(variance, tg.full([1], eps)))), [n, c, t, h, w]);
        const want = tg.add(tg.mul(normed, tg.reshape(wt, [c, 1, 1, 1])), tg.reshape(b, [c, 1, 1, 1]));
        const gx = await x.to('webgpu');
        const [gw, gb] = await Promise.all([wt.to('webgpu'), b.to('webgpu')]);
        const got = tg.groupNorm(gx, g, gw, gb, eps);
        expectClose(await got.toArray(), await want.toArray(), { atol: 2e-5, rtol: 2e-5 }, 'vs composed ops');
        [grouped, mean, centered, variance, normed, want, gx, gw, gb, got].forEach((tt) => tt.dispose());
      },
    );
  });
});

describe.skipIf(!gpu.available)(`channelRmsNorm, WebGPU vs CPU ${gpu.skipReason}`, () => {
  const SHAPES = [
    [2, 5, 3, 7],
    [1, 6, 3, 4, 5],
    [2, 7, 9],
    [3, 4],
    [1, 3, 3, 3],
  ];
  it.each(SHAPES.map((s) => [s.join('x'), s] as const))('%s: every dtype, weight on/off', async (_, shape) => {
    for (const dtype of FLOATS) {
      await withInputs(
        [
          [shape, dtype],
          [[shape[1]], 'bfloat16'],
        ],
        async (x, w) => {
          await checkBoth([x, w], (xx, ww) => tg.channelRmsNorm(xx, ww, 1e-6), tol(dtype), `${dtype} weight`);
          await checkBoth([x], (xx) => tg.channelRmsNorm(xx, undefined, 1e-3), tol(dtype), `${dtype} plain`);
          await checkBoth([x, w], (xx, ww) => tg.channelRmsNorm(xx, ww, 1e-6, { activation: 'silu' }), tol(dtype), `${dtype} fused silu`);
        },
      );
    }
  });

  it('strided views, empty batch, and H*W past 65536', async () => {
    await withInputs(
      [
        [[2, 5, 6, 7], 'float16'],
        [[0, 3, 4, 4], 'float32'],
        [[1, 3, 2, 256, 257], 'bfloat16'],
      ],
      async (x, e, big) => {
        await checkBoth([x], (xx) => tg.channelRmsNorm(xx.transpose(2, 3).slice(3, 1, 5), undefined, 1e-6), tol('float16'), 'strided');
        await checkBoth([e], (ee) => tg.channelRmsNorm(ee, undefined, 1e-6), tol('float32'), 'N = 0');
        await checkBoth([big], (bb) => tg.channelRmsNorm(bb, undefined, 1e-6), tol('bfloat16'), 'large');
      },
    );
  });

  it('matches x / sqrt(mean_c x^2 + eps) * w computed on the host', async () => {
    const [n, c, s] = [2, 5, 6];
    await withInputs(
      [
        [[n, c, 2, 3], 'float32'],
        [[c], 'float32'],
      ],
      async (x, w) => {
        const xs = await x.toArray();
        const ws = await w.toArray();
        const want = new Float32Array(xs.length);
        for (let ni = 0; ni < n; ni++) {
          for (let p = 0; p < s; p++) {
            let sq = 0;
            for (let ci = 0; ci < c; ci++) sq += xs[(ni * c + ci) * s + p] ** 2;
            for (let ci = 0; ci < c; ci++) want[(ni * c + ci) * s + p] = (xs[(ni * c + ci) * s + p] / Math.sqrt(sq / c + 1e-6)) * ws[ci];
          }
        }
        const [gx, gw] = await Promise.all([x.to('webgpu'), w.to('webgpu')]);
        const got = tg.channelRmsNorm(gx, gw, 1e-6);
        expectClose(await got.toArray(), want, { atol: 1e-5, rtol: 1e-5 }, 'vs host');
        [gx, gw, got].forEach((t) => t.dispose());
      },
    );
  });
});

describe.skipIf(!gpu.available)(`upsample 2x, WebGPU vs CPU ${gpu.skipReason}`, () => {
  const SHAPES = [
    [2, 3, 5, 7],
    [1, 2, 3, 4, 5],
    [1, 1, 1, 1],
    [1, 2, 1, 6],
    [1, 2, 5, 1],
  ];
  it.each(SHAPES.map((s) => [s.join('x'), s] as const))('%s: nearest and bilinear, every dtype', async (_, shape) => {
    for (const dtype of FLOATS) {
      await withInputs([[shape, dtype]], async (x) => {
        for (const mode of ['nearest', 'bilinear'] as const) {
          const r = await checkBoth(
            [x],
            (xx) => tg.upsample(xx, { scale: 2, mode }),
            mode === 'nearest' ? { atol: 0, rtol: 0 } : tol(dtype),
            `${dtype} ${mode}`,
          );
          expect(r.shape).toEqual([...shape.slice(0, -2), 2 * shape[shape.length - 2], 2 * shape[shape.length - 1]]);
        }
      });
    }
  });

  it('strided views, empty batch, H*W past 65536 (4-D and 5-D)', async () => {
    await withInputs(
      [
        [[1, 3, 5, 6], 'bfloat16'],
        [[0, 2, 3, 3], 'float16'],
        [[1, 2, 256, 257], 'float16'],
        [[1, 1, 2, 256, 256], 'float32'],
      ],
      async (x, e, big4, big5) => {
        for (const mode of ['nearest', 'bilinear'] as const) {
          await checkBoth([x], (xx) => tg.upsample(xx.transpose(2, 3).slice(2, 1, 6, 2), { scale: 2, mode }), tol('bfloat16'), `strided ${mode}`);
          await checkBoth([e], (ee) => tg.upsample(ee, { scale: 2, mode }), tol('float16'), `N = 0 ${mode}`);
          await checkBoth([big4], (bb) => tg.upsample(bb, { scale: 2, mode }), tol('float16'), `large 4-D ${mode}`);
          await checkBoth([big5], (bb) => tg.upsample(bb, { scale: 2, mode }), tol('float32'), `large 5-D ${mode}`);
        }
      },
    );
  });

  it('bilinear of a 2x2 input equals torch by hand; nearest repeats each pixel 2x2', async () => {
    const x = await tg.tensor([1, 2, 3, 4], { shape: [1, 1, 2, 2] }).to('webgpu');
    const bil = tg.upsample(x, { scale: 2, mode: 'bilinear' });
    const near = tg.upsample(x, { scale: 2, mode: 'nearest' });
    // torch.nn.functional.interpolate(torch.tensor([[[[1., 2.], [3., 4.]]]]), scale_factor=2, mode='bilinear')
    expect(Array.from(await bil.toArray())).toEqual([1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4]);
    expect(Array.from(await near.toArray())).toEqual([1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4]);
    [x, bil, near].forEach((t) => t.dispose());
  });
});

describe.skipIf(!gpu.available)(`VAE ops: dispatch counts ${gpu.skipReason}`, () => {
  it('one dispatch each; two only when packed 16-bit rows would share words', async () => {
    await withInputs(
      [
        [[2, 6, 3, 4], 'float32'],
        [[6], 'bfloat16'],
        [[1, 4, 3, 3], 'float16'],
        [[1, 4, 2, 3, 4], 'bfloat16'],
      ],
      async (x, w, odd, x5) => {
        expect(await dispatchesOf([x, w, w], (a, b, c) => tg.groupNorm(a, 3, b, c))).toBe(1);
        expect(await dispatchesOf([x], (a) => tg.groupNorm(a.transpose(2, 3), 2))).toBe(1);
        expect(await dispatchesOf([x5], (a) => tg.groupNorm(a, 2))).toBe(1);
        // 2 channels x 9 positions per group: odd in f16 words -> float32 + cast.
        expect(await dispatchesOf([odd], (a) => tg.groupNorm(a, 2))).toBe(1);
        expect(await dispatchesOf([odd], (a) => tg.groupNorm(a, 4))).toBe(2);
        expect(await dispatchesOf([x, w], (a, b) => tg.channelRmsNorm(a, b, 1e-6))).toBe(1);
        expect(await dispatchesOf([x, w], (a, b) => tg.channelRmsNorm(a, b, 1e-6, { activation: 'silu' }))).toBe(1);
        expect(await dispatchesOf([x5], (a) => tg.channelRmsNorm(a, undefined, 1e-6))).toBe(1);
        expect(await dispatchesOf([odd], (a) => tg.channelRmsNorm(a, undefined, 1e-6))).toBe(2);
        for (const mode of ['nearest', 'bilinear'] as const) {
          expect(await dispatchesOf([odd], (a) => tg.upsample(a, { scale: 2, mode }))).toBe(1);
          expect(await dispatchesOf([x5], (a) => tg.upsample(a.transpose(3, 4), { scale: 2, mode }))).toBe(1);
        }
      },
    );
  });
});

describe('VAE ops: typed errors', () => {
  it('rejects bad shapes, dtypes and options', () => {
    const x = randomTensor([1, 6, 3, 3]);
    const w5 = randomTensor([5]);
    const ints = tg.tensor([1, 2, 3, 4], { shape: [1, 1, 2, 2], dtype: 'int32' });
    expect(() => tg.groupNorm(x, 4)).toThrow(ShapeError);
    expect(() => tg.groupNorm(x, 0)).toThrow(ShapeError);
    expect(() => tg.groupNorm(x, 3, w5)).toThrow(ShapeError);
    expect(() => tg.groupNorm(x, 3, undefined, w5)).toThrow(ShapeError);
    expect(() => tg.groupNorm(w5, 1)).toThrow(ShapeError);
    expect(() => tg.groupNorm(tg.reshape(x, [1, 6, 1, 1, 3, 3]), 3)).toThrow(ShapeError);
    expect(() => tg.groupNorm(ints, 1)).toThrow(DTypeError);
    expect(() => tg.groupNorm(x, 3, undefined, undefined, -1)).toThrow(RangeError);
    expect(() => tg.channelRmsNorm(x, w5, 1e-6)).toThrow(ShapeError);
    expect(() => tg.channelRmsNorm(w5, undefined, 1e-6)).toThrow(ShapeError);
    expect(() => tg.upsample(tg.reshape(x, [6, 3, 3]), { scale: 2, mode: 'nearest' })).toThrow(ShapeError);
    expect(() => tg.upsample(x, { scale: 3 as 2, mode: 'nearest' })).toThrow(RangeError);
    expect(() => tg.upsample(x, { scale: 2, mode: 'bicubic' as 'nearest' })).toThrow(RangeError);
    expect(() => tg.upsample(ints, { scale: 2, mode: 'nearest' })).toThrow(DTypeError);
    [x, w5, ints].forEach((t) => t.dispose());
  });
});

describe('channelRmsNorm with fused SiLU (CPU semantics)', () => {
  it('equals the norm followed by silu()', async () => {
    const x = randomTensor([2, 5, 3, 4], 'float32');
    const w = randomTensor([5], 'float32');
    const norm = tg.channelRmsNorm(x, w, 1e-6);
    const composed = norm.silu();
    const fused = tg.channelRmsNorm(x, w, 1e-6, { activation: 'silu' });
    expectClose(await fused.toArray(), await composed.toArray(), { rtol: 1e-6, atol: 1e-7 }, 'fused vs composed');
    for (const t of [x, w, norm, composed, fused]) t.dispose();
    const y = randomTensor([1, 2, 2], 'float32');
    expect(() => tg.channelRmsNorm(y, undefined, 1e-6, { activation: 'relu' as 'silu' })).toThrow(/activation must be 'silu'/);
    y.dispose();
  });
});
