// The decode GEMV (x @ W.T, W stored [N, K]) reads a float32 activation as 16-byte chunks dotted with 4 decoded
// weights (gemv.ts, the avec variant). Checked against the CPU for every weight format the GEMV takes (f32, bf16,
// f16, FP8 with block scales, int4), 1-4 rows, rows with a tail (K not a multiple of a chunk: a narrowed weight),
// the SwiGLU epilogue, and the views that must fall back to scalar loads (an activation at an odd offset, a row
// stride not a multiple of 4). activationVectorizes is asserted for each case, so the test knows which path it ran.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { linear, randn, setDefaultDevice, Generator, type Tensor } from '../../src/index.js';
import { quantizeInt4 } from '../../src/ops/int4.js';
import { activationVectorizes } from '../../src/kernels/matmul/gemv.js';
import { expectClose } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

const TOL = { atol: 2e-4, rtol: 2e-4 };
type WeightKind = 'float32' | 'bfloat16' | 'float16' | 'fp8' | 'int4';

/** The weight (and its linear options) on the CPU: FP8 with 128x128 block scales, int4 with groups of 32. */
function weightOf(kind: WeightKind, plain: Tensor): { w: Tensor; options: Record<string, unknown>; extra: Tensor[] } {
  if (kind === 'fp8') {
    const q = tg.quantize(plain, { granularity: 'block128' });
    return { w: q.data, options: { weightScale: q.scale }, extra: [q.scale] };
  }
  if (kind === 'int4') {
    const q = quantizeInt4(plain, 32);
    return { w: q.data, options: { weightScale: q.scale, int4: { zero: q.zero, groupSize: 32 } }, extra: [q.scale, q.zero] };
  }
  return { w: plain.to(kind), options: {}, extra: [] };
}

/** The same options with their tensors on the GPU. */
async function optionsOnGpu(options: Record<string, unknown>): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(options)) {
    if (value instanceof tg.Tensor) out[key] = await value.to('webgpu');
    else if (value && typeof value === 'object') out[key] = await optionsOnGpu(value as Record<string, unknown>);
    else out[key] = value;
  }
  return out;
}

/** linear(view(x), W) on the GPU against the CPU; the view is taken on each device (a copy would compact it). */
async function compare(
  full: Tensor,
  kind: WeightKind,
  plain: Tensor,
  vectorizes: boolean,
  extra: Record<string, unknown> = {},
  view: (t: Tensor) => Tensor = (t) => t,
): Promise<void> {
  const { w, options } = weightOf(kind, plain);
  const x = view(full);
  const want = (await linear(x, w, undefined, { ...options, ...extra } as tg.LinearOptions).toArray()) as Float32Array;
  const gx = view(await full.to('webgpu'));
  const gw = await w.to('webgpu');
  const gopts = await optionsOnGpu({ ...options, ...extra });
  expect(activationVectorizes(gx.operand() as never, x.shape[0], false, {}), `${kind}: the vec4 path`).toBe(vectorizes);
  const got = (await linear(gx, gw, undefined, gopts as tg.LinearOptions).toArray()) as Float32Array;
  expectClose(got, want, TOL, `${kind} x ${x.shape.join('x')}`);
}

describe(`decode GEMV with vec4 activation chunks ${gpu.skipReason}`, () => {
  it.runIf(gpu.available).each(['float32', 'bfloat16', 'float16', 'fp8', 'int4'] as const)('%s weights, 1 / 3 / 4 rows, odd N', async (kind) => {
    const g = new Generator(91);
    const [n, k] = [37, 256];
    const plain = randn([n, k], { generator: g });
    for (const m of [1, 3, 4]) await compare(randn([m, k], { generator: g }), kind, plain, true);
  });

  it.runIf(gpu.available)('a row tail: a narrowed weight whose K is not a multiple of the chunk', async () => {
    const g = new Generator(92);
    for (const [kind, k] of [
      ['float32', 130],
      ['bfloat16', 133],
      ['float16', 131],
    ] as const) {
      // Rows of 136 stored elements (16-byte aligned for every dtype), K of them read.
      const wide = randn([19, 136], { generator: g }).to(kind);
      // Activation rows 16-byte aligned too (stride 136).
      const xFull = randn([2, 136], { generator: g });
      const x = xFull.narrow(1, 0, k);
      const want = (await linear(x, wide.narrow(1, 0, k)).toArray()) as Float32Array;
      const gw = (await wide.to('webgpu')).narrow(1, 0, k);
      const gx = (await xFull.to('webgpu')).narrow(1, 0, k);
      expect(activationVectorizes(gx.operand() as never, 2, false, {})).toBe(true);
      expectClose((await linear(gx, gw).toArray()) as Float32Array, want, TOL, `${kind} K ${k}`);
    }
  });

  it.runIf(gpu.available)('SwiGLU and residual epilogues over the vec4 path', async () => {
    const g = new Generator(93);
    const plain = randn([2 * 24, 128], { generator: g });
    const x = randn([3, 128], { generator: g });
    const residual = randn([3, 24], { generator: g });
    await compare(x, 'bfloat16', plain, true, { activation: 'swiglu', residual });
  });

  it.runIf(gpu.available)('views that fall back to scalar loads: an odd offset, a row stride not a multiple of 4', async () => {
    const g = new Generator(94);
    const plain = randn([21, 128], { generator: g });
    await compare(randn([1, 129], { generator: g }), 'bfloat16', plain, false, {}, (t) => t.narrow(1, 1, 128));
    await compare(randn([3, 130], { generator: g }), 'float32', plain, false, {}, (t) => t.narrow(1, 0, 128));
    // The same rows at an aligned stride take the vec4 path.
    await compare(randn([3, 132], { generator: g }), 'float32', plain, true, {}, (t) => t.narrow(1, 0, 128));
  });

  it.runIf(gpu.available)('NaN and Inf in the activation reach the output as the CPU gives them', async () => {
    const g = new Generator(95);
    const plain = randn([9, 64], { generator: g });
    const x = randn([2, 64], { generator: g });
    const values = (await x.toArray()) as Float32Array;
    values[3] = Number.NaN;
    values[64 + 5] = Number.POSITIVE_INFINITY;
    const special = tg.tensor(values, { shape: [2, 64] });
    const want = (await linear(special, plain).toArray()) as Float32Array;
    const got = (await linear(await special.to('webgpu'), await plain.to('webgpu')).toArray()) as Float32Array;
    for (let i = 0; i < 9; i++) expect(Number.isNaN(got[i]), `row 0 col ${i}`).toBe(true);
    for (let i = 9; i < 18; i++) expect(got[i], `row 1 col ${i - 9}`).toBe(want[i]);
  });
});
