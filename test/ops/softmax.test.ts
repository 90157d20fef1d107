// softmax / logSoftmax on WebGPU against the CPU backend (f32/f16/bf16; row lengths 1 to 262144; every dim of 3-D
// tensors; strided inputs; +-1e4 logits, ties, -Inf masks, all -Inf and NaN rows; empty and 0-d tensors), against
// independent expectations (rows sum to 1, logSoftmax = log(softmax), hand-computed values), dispatch counts and
// errors.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice, type DType, type Tensor } from '../../src/index.js';
import { checkBoth, expectClose, FLOAT_DTYPES, randomTensor, type Tolerance } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { softmaxTuning } from '../../src/kernels/softmax/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

type Float = (typeof FLOAT_DTYPES)[number];

/**
 * GPU (f32 math, one output rounding) vs CPU (f64, one rounding). f32 softmax: exp(v - max) where v - max is rounded
 * in f32 (|v - max| <= 88, so <= ~5e-6 relative) plus an f32 row sum; values below exp(-88) ~ 6e-39 are flushed to 0
 * on the GPU (atol covers them). f32 logSoftmax: one rounding of v - max - log(sum) plus the sum's error.
 * Narrow outputs: within about one ulp of the output dtype (the f32 result may round the other way); f16 softmax
 * values under 6e-5 are f16 subnormals, whose spacing is 6e-8.
 */
function tol(dtype: Float, log: boolean): Tolerance {
  if (dtype === 'float32') return log ? { atol: 1e-5, rtol: 5e-7 } : { atol: 1.2e-38, rtol: 2e-5 };
  if (dtype === 'float16') return log ? { atol: 1e-5, rtol: 1e-3 } : { atol: 6e-8, rtol: 1e-3 };
  return log ? { atol: 1e-5, rtol: 8e-3 } : { atol: 1.2e-38, rtol: 8e-3 };
}

const sm = (dim: number, log: boolean) => (x: Tensor) => (log ? x.logSoftmax(dim) : x.softmax(dim));

/** A CPU tensor from explicit values (the backends then see identical inputs). */
const cpuTensor = (values: number[], shape: number[], dtype: DType = 'float32') => tg.tensor(values, { shape, dtype });

/** Dispatches made while fn runs and its result is read (the read itself is a copy, not a dispatch). */
async function dispatchesOf(fn: () => Tensor): Promise<{ dispatches: number; values: Float32Array | Int32Array | Uint8Array }> {
  await tg.synchronize();
  const before = tg.gpuCounters().dispatches;
  const out = fn();
  const dispatches = tg.gpuCounters().dispatches - before;
  try {
    return { dispatches, values: await out.toArray() };
  } finally {
    out.dispose();
  }
}

/** fn under one adapter policy of the softmax launcher (its dispatches are queued before this returns). */
function withPolicy(policy: 'gpu' | 'software', fn: () => Tensor): Tensor {
  softmaxTuning.policy = policy;
  try {
    return fn();
  } finally {
    softmaxTuning.policy = undefined;
  }
}

/** Row sums of a [rows, d] result, in f64. */
function rowSums(values: ArrayLike<number>, rows: number, d: number): number[] {
  const out: number[] = [];
  for (let r = 0; r < rows; r++) {
    let s = 0;
    for (let j = 0; j < d; j++) s += values[r * d + j];
    out.push(s);
  }
  return out;
}

describe.skipIf(!gpu.available)(`softmax / logSoftmax, WebGPU vs CPU ${gpu.skipReason}`, () => {
  it.each([1, 7, 255, 4097, 128256, 262144])('row length %i, f32/f16/bf16, softmax and logSoftmax', async (n) => {
    for (const dtype of FLOAT_DTYPES) {
      // Scale 4: values spread over exp's range without every row being one-hot.
      const x = randomTensor([1, n], dtype, 'normal', 4);
      for (const log of [false, true]) {
        const r = await checkBoth([x], sm(-1, log), tol(dtype, log), `${log ? 'logSoftmax' : 'softmax'} [1,${n}] ${dtype}`);
        expect(r.shape).toEqual([1, n]);
        expect(r.dtype).toBe(dtype);
        if (!log) {
          // Independent of the CPU backend: the probabilities sum to 1 (narrow dtypes: each value rounded once).
          const [s] = rowSums(r.gpu, 1, n);
          expect(Math.abs(s - 1), `sum of softmax [1,${n}] ${dtype}`).toBeLessThan(dtype === 'float32' ? 1e-5 : dtype === 'float16' ? 2e-3 : 1e-2);
        }
      }
    }
  });

  it('batches of rows: [32, 4097], [3, 128256]', async () => {
    for (const [shape, dtypes] of [
      [[32, 4097], FLOAT_DTYPES],
      [
        [3, 128256],
        ['float32', 'bfloat16'],
      ],
    ] as const) {
      for (const dtype of dtypes) {
        const x = randomTensor(shape, dtype, 'normal', 3);
        for (const log of [false, true]) {
          const r = await checkBoth([x], sm(1, log), tol(dtype, log), `${log ? 'log' : ''}softmax ${JSON.stringify(shape)} ${dtype}`);
          if (!log && dtype === 'float32') {
            for (const s of rowSums(r.gpu, shape[0], shape[1])) expect(Math.abs(s - 1)).toBeLessThan(1e-5);
          }
        }
      }
    }
  });

  it('every dim of a 3-D tensor (0, 1, -1, -2: inner > 1 for all but the last), f32/f16/bf16', async () => {
    for (const dtype of FLOAT_DTYPES) {
      // Odd and even sizes: packed f16/bf16 outputs with inner > 1 or odd rows go through f32 + cast.
      for (const shape of [
        [4, 5, 6],
        [3, 300, 2],
      ]) {
        const x = randomTensor(shape, dtype, 'normal', 2);
        for (const dim of [0, 1, -1, -2]) {
          for (const log of [false, true]) {
            await checkBoth([x], sm(dim, log), tol(dtype, log), `${log ? 'log' : ''}softmax(${dim}) ${JSON.stringify(shape)} ${dtype}`);
          }
        }
      }
    }
  });

  it('strided and offset inputs: transpose, permute, stepped slice, narrow, select, odd f16 offset', async () => {
    const a = randomTensor([9, 5]);
    const b = randomTensor([4, 10]);
    const c = randomTensor([3, 4, 5]);
    const h = randomTensor([3, 7], 'float16');
    const hp = randomTensor([18], 'float16');
    const cases: [Tensor, (x: Tensor) => Tensor, string][] = [
      [a, (x) => x.T, 'transpose'],
      [b, (x) => x.slice(1, 1, 10, 2), 'slice step 2'],
      [b, (x) => x.narrow(1, 3, 6), 'narrow last dim'],
      [b, (x) => x.narrow(0, 1, 2), 'narrow rows (contiguous, offset 10)'],
      [c, (x) => x.permute(2, 0, 1), 'permute'],
      [h, (x) => x.select(0, 1), 'f16 row at offset 7'],
      [hp, (x) => x.narrow(0, 1, 16), 'f16 even row at odd offset (packed output)'],
    ];
    for (const [x, view, label] of cases) {
      for (const dim of [-1, 0]) {
        for (const log of [false, true]) {
          await checkBoth([x], (t) => sm(dim, log)(view(t)), tol(x.dtype as Float, log), `${label} dim ${dim} log ${log}`);
        }
      }
    }
  });

  it('large-magnitude logits (+-1e4), ties, -Inf masks, +Inf', async () => {
    for (const dtype of FLOAT_DTYPES) {
      const big = randomTensor([4, 1000], dtype, 'normal', 1e4);
      for (const log of [false, true]) await checkBoth([big], sm(-1, log), tol(dtype, log), `+-1e4 ${dtype}`);
    }
    // Values within 88 of a huge max: exp(v - max) must not overflow; -1e4 against +1e4 is exactly 0.
    const huge = cpuTensor([1e4, 1e4 - 1, 1e4 - 2, -1e4, 1e4 - 80], [1, 5]);
    const want = [1, Math.exp(-1), Math.exp(-2), 0, Math.exp(-80)];
    const z = want.reduce((s, v) => s + v, 0);
    const r = await checkBoth([huge], sm(-1, false), tol('float32', false), 'huge');
    expectClose(
      r.gpu,
      want.map((v) => v / z),
      { atol: 0, rtol: 2e-6 },
      'huge vs formula',
    );
    const rl = await checkBoth([huge], sm(-1, true), tol('float32', true), 'huge log');
    expect(rl.gpu[3]).toBeCloseTo(-2e4 - Math.log(z), 1);

    // Ties: equal values give equal probabilities (exactly 1/n for a constant row).
    for (const n of [7, 4096, 5000]) {
      const tie = tg.full([2, n], 3.25);
      const t = await checkBoth([tie], sm(-1, false), tol('float32', false), `constant row ${n}`);
      const first = t.gpu[0];
      expect(Math.abs(first - 1 / n) / (1 / n), `1/${n}`).toBeLessThan(1e-6);
      expect(
        Array.from(t.gpu).every((v) => v === first),
        `all ties equal, n = ${n}`,
      ).toBe(true);
      const tl = await checkBoth([tie], sm(-1, true), tol('float32', true), `constant row log ${n}`);
      expect(tl.gpu[n + 3]).toBeCloseTo(-Math.log(n), 5);
    }

    // -Inf masks: masked entries are exactly 0 (log: -Inf); the rest renormalise among themselves.
    const n = 4097;
    const vals = Array.from({ length: 2 * n }, (_, i) => (i % 3 === 0 ? -Infinity : Math.sin(i) * 5));
    for (const dtype of FLOAT_DTYPES) {
      const masked = cpuTensor(vals, [2, n], dtype);
      const m = await checkBoth([masked], sm(-1, false), tol(dtype, false), `masked ${dtype}`);
      const ml = await checkBoth([masked], sm(-1, true), tol(dtype, true), `masked log ${dtype}`);
      for (let i = 0; i < 2 * n; i++) {
        if (vals[i] === -Infinity) {
          expect(m.gpu[i]).toBe(0);
          expect(ml.gpu[i]).toBe(-Infinity);
        }
      }
    }
    // A causal-mask-like row: only one finite entry gives exactly 1 (log: exactly 0).
    const one = cpuTensor([-Infinity, -Infinity, 2.5, -Infinity], [4]);
    expect(Array.from((await checkBoth([one], sm(0, false), tol('float32', false))).gpu)).toEqual([0, 0, 1, 0]);
    expect(Array.from((await checkBoth([one], sm(0, true), tol('float32', true))).gpu)).toEqual([-Infinity, -Infinity, 0, -Infinity]);
    // +Inf: exp(inf - inf) is NaN, so the row is NaN (as in torch).
    const inf = cpuTensor([1, Infinity, 2, 0, 1, 2], [2, 3]);
    const ri = await checkBoth([inf], sm(-1, false), tol('float32', false), '+Inf');
    expect(Array.from(ri.gpu.slice(0, 3)).every(Number.isNaN)).toBe(true);
    expect(Array.from(ri.gpu.slice(3)).every(Number.isFinite)).toBe(true);
  });

  it('an all -Inf row gives NaN and a NaN entry makes its row NaN (like torch); other rows are unaffected', async () => {
    for (const dtype of FLOAT_DTYPES) {
      for (const d of [6, 300, 4097]) {
        const vals = Array.from({ length: 3 * d }, (_, i) => Math.cos(i));
        for (let j = 0; j < d; j++) vals[j] = -Infinity; // row 0: all -Inf
        vals[d + (d >> 1)] = NaN; // row 1: one NaN
        const x = cpuTensor(vals, [3, d], dtype);
        for (const log of [false, true]) {
          const r = await checkBoth([x], sm(-1, log), tol(dtype, log), `all -Inf / NaN rows, d ${d}, ${dtype}, log ${log}`);
          expect(Array.from(r.gpu.slice(0, 2 * d)).every(Number.isNaN), `rows 0-1 NaN, d ${d} ${dtype}`).toBe(true);
          expect(Array.from(r.gpu.slice(2 * d)).every(Number.isFinite), `row 2 finite, d ${d} ${dtype}`).toBe(true);
        }
      }
    }
    // Along dim 0 (inner > 1): the all -Inf column only.
    const col = cpuTensor([-Infinity, 1, -Infinity, 2, -Infinity, 3], [3, 2]);
    const r = await checkBoth([col], sm(0, false), tol('float32', false), 'all -Inf column');
    expect([r.gpu[0], r.gpu[2], r.gpu[4]].every(Number.isNaN)).toBe(true);
    expect(r.gpu[1] + r.gpu[3] + r.gpu[5]).toBeCloseTo(1, 6);
  });

  it('empty tensors keep their shape; a 0-d tensor gives 1 (log: 0)', async () => {
    for (const dtype of FLOAT_DTYPES) {
      for (const [shape, dim] of [
        [[0, 5], 1],
        [[3, 0], 1],
        [[3, 0], 0],
        [[2, 0, 3], 1],
        [[2, 0, 3], 2],
        [[0], 0],
      ] as const) {
        for (const log of [false, true]) {
          const r = await checkBoth([tg.zeros(shape, { dtype })], sm(dim, log), tol(dtype, log), `empty ${JSON.stringify(shape)} dim ${dim}`);
          expect(r.shape).toEqual(shape);
          expect(r.gpu.length).toBe(0);
        }
      }
      const s = tg.tensor(-3.5, { dtype });
      for (const dim of [0, -1]) {
        const r = await checkBoth([s], sm(dim, false), tol(dtype, false), `0-d ${dtype}`);
        expect(r.shape).toEqual([]);
        expect(Array.from(r.gpu)).toEqual([1]);
        expect(Array.from((await checkBoth([s], sm(dim, true), tol(dtype, true))).gpu)).toEqual([0]);
      }
    }
  });

  it('independent checks: a hand-computed case, and logSoftmax = log(softmax) on the GPU alone', async () => {
    // softmax([1, 2, 3]) = e^k / (e + e^2 + e^3)
    const z = Math.E + Math.E ** 2 + Math.E ** 3;
    const hand = cpuTensor([1, 2, 3, -Infinity, 0, 0], [2, 3]);
    for (const dtype of FLOAT_DTYPES) {
      const x = await hand.to(dtype).to('webgpu');
      const p = await x.softmax(-1).toArray();
      const lp = await x.logSoftmax(-1).toArray();
      const t = dtype === 'float32' ? { atol: 0, rtol: 3e-7 } : tol(dtype, false);
      expectClose(p, [Math.E / z, Math.E ** 2 / z, Math.E ** 3 / z, 0, 0.5, 0.5], t, `hand softmax ${dtype}`);
      expectClose(
        lp,
        [1 - Math.log(z), 2 - Math.log(z), 3 - Math.log(z), -Infinity, -Math.LN2, -Math.LN2],
        dtype === 'float32' ? { atol: 0, rtol: 3e-7 } : tol(dtype, true),
        `hand log ${dtype}`,
      );
      x.dispose();
    }
    // Published values: torch.softmax(tensor([1., 2., 3.])).
    const p = await (await tg.tensor([1, 2, 3]).to('webgpu')).softmax().toArray();
    expectClose(p, [0.09003057, 0.24472847, 0.66524096], { atol: 2e-7, rtol: 0 }, 'torch values');

    // logSoftmax vs log(softmax), both from the GPU, over 128256 random logits (where softmax is not subnormal).
    const x = await randomTensor([2, 128256], 'float32', 'normal', 4).to('webgpu');
    const [sp, slp] = await Promise.all([x.softmax(-1).toArray(), x.logSoftmax(-1).toArray()]);
    const logOfSoftmax = Array.from(sp, (v) => (v > 1e-30 ? Math.log(v) : NaN));
    const fromLog = Array.from(slp, (v, i) => (Number.isNaN(logOfSoftmax[i]) ? NaN : v));
    expectClose(fromLog, logOfSoftmax, { atol: 2e-5, rtol: 2e-6 }, 'logSoftmax = log(softmax)');
    for (const s of rowSums(sp, 2, 128256)) expect(Math.abs(s - 1)).toBeLessThan(1e-5);
    x.dispose();
  });

  it('dispatch counts: 1 for contiguous f32 (offset too) and even-length packed rows; 2 for odd packed rows, inner > 1 packed, strided', async () => {
    const f32 = await randomTensor([4, 4097]).to('webgpu');
    const cases: [string, () => Tensor, number][] = [
      ['f32 [4,4097] softmax', () => f32.softmax(-1), 1],
      ['f32 [4,4097] logSoftmax', () => f32.logSoftmax(-1), 1],
      ['f32 dim 0 (inner > 1)', () => f32.softmax(0), 1],
      ['f32 contiguous view at an offset', () => f32.narrow(0, 1, 2).softmax(-1), 1],
      // A strided view is compacted first (one copy dispatch), then softmax.
      ['f32 transposed', () => f32.T.softmax(-1), 2],
    ];
    const h = await randomTensor([4, 4097], 'float16').to('webgpu');
    const hEven = await randomTensor([4, 4096], 'float16').to('webgpu');
    const bEven = await randomTensor([2, 128256], 'bfloat16').to('webgpu');
    cases.push(
      // Packed 16-bit outputs: whole words per row (inner 1, even length) are written directly...
      ['f16 [4,4096]', () => hEven.softmax(-1), 1],
      // Two long rows: one workgroup each on a software adapter, pieces on several in two dispatches on a GPU
      // (SOFTMAX_POLICIES; test/ops/softmax-long.test.ts covers the plans).
      ['bf16 [2,128256] (software policy)', () => withPolicy('software', () => bEven.logSoftmax(-1)), 1],
      ['bf16 [2,128256] (GPU policy)', () => withPolicy('gpu', () => bEven.logSoftmax(-1)), 2],
      // ...else rows would share words between workgroups: softmax into f32, then a cast dispatch.
      ['f16 [4,4097] (odd rows)', () => h.softmax(-1), 2],
      ['f16 [4,4096] dim 0 (inner > 1)', () => hEven.softmax(0), 2],
      ['f16 0-d', () => hEven.select(0, 0).select(0, 5).softmax(), 2],
    );
    const s0 = tg.tensor(2, { device: 'webgpu' });
    const e0 = tg.zeros([0, 8], { device: 'webgpu' });
    cases.push(['f32 0-d', () => s0.softmax(), 1], ['f32 empty', () => e0.softmax(-1), 0]);
    for (const [label, fn, want] of cases) {
      const { dispatches } = await dispatchesOf(fn);
      expect(dispatches, label).toBe(want);
    }
    for (const t of [f32, h, hEven, bEven, s0, e0]) t.dispose();
  });

  it('many short rows (one invocation per row): [70000, 3] f32 and [4099, 10] bf16, dims with inner > 1', async () => {
    for (const [shape, dtype, dim] of [
      [[70000, 3], 'float32', -1],
      [[4099, 10], 'bfloat16', -1],
      [[50, 7, 9], 'float16', 1],
    ] as const) {
      const x = randomTensor([...shape], dtype, 'normal', 4);
      for (const log of [false, true]) await checkBoth([x], sm(dim, log), tol(dtype, log), `${log ? 'logSoftmax' : 'softmax'} [${shape}] ${dtype}`);
      x.dispose();
    }
  });

  it('rows longer than 262144 split across workgroups (GPU policy, 2 dispatches): values, masks, NaN rows, odd packed rows', async () => {
    softmaxTuning.policy = 'gpu';
    try {
      await longRowsSplit();
    } finally {
      softmaxTuning.policy = undefined;
    }
  });

  async function longRowsSplit(): Promise<void> {
    for (const [rows, n, dtype] of [
      [1, 262145, 'float32'],
      [2, 1_000_000, 'float32'],
      [1, 300_001, 'bfloat16'],
    ] as const) {
      const x = randomTensor([rows, n], dtype, 'normal', 4);
      for (const log of [false, true]) {
        const r = await checkBoth([x], sm(-1, log), tol(dtype, log), `${log ? 'logSoftmax' : 'softmax'} [${rows},${n}] ${dtype}`);
        if (!log) for (const s of rowSums(r.gpu, rows, n)) expect(Math.abs(s - 1)).toBeLessThan(dtype === 'float32' ? 1e-5 : 1e-2);
      }
      x.dispose();
    }
    const gx = await randomTensor([1, 262148], 'float32', 'normal', 4).to('webgpu');
    expect((await dispatchesOf(() => gx.softmax(-1))).dispatches).toBe(2);
    // A -Inf mask everywhere but one entry, then an all -Inf row and a NaN row: torch's NaN rows.
    const values = new Float32Array(3 * 262150).fill(-Infinity);
    values[12345] = 3;
    values[2 * 262150 + 777] = NaN;
    const masked = await tg.tensor(values, { shape: [3, 262150] }).to('webgpu');
    const out = await masked.softmax(-1).toArray();
    expect(out[12345]).toBe(1);
    expect(out[0]).toBe(0);
    expect(Number.isNaN(out[262150 + 5])).toBe(true);
    expect(Number.isNaN(out[2 * 262150 + 9])).toBe(true);
    for (const t of [gx, masked]) t.dispose();
  }

  it('rejects non-float inputs (DTypeError) and bad dims (ShapeError) on the GPU too', async () => {
    const i = tg.tensor([1, 2, 3], { dtype: 'int32', device: 'webgpu' });
    const x = tg.zeros([2, 3], { device: 'webgpu' });
    expect(() => i.softmax()).toThrow(tg.DTypeError);
    expect(() => i.logSoftmax()).toThrow(tg.DTypeError);
    for (const dim of [2, -3, 0.5]) {
      expect(() => x.softmax(dim)).toThrow(tg.ShapeError);
      expect(() => x.logSoftmax(dim)).toThrow(tg.ShapeError);
    }
    i.dispose();
    x.dispose();
  });
});

describe('softmax / logSoftmax errors and hand-computed values on the CPU backend', () => {
  it('int32, uint8 and bool inputs -> DTypeError', () => {
    for (const dtype of ['int32', 'uint8', 'bool', 'float8_e4m3fn'] as const) {
      const x = tg.tensor([1, 0, 1], { dtype });
      expect(() => x.softmax()).toThrow(tg.DTypeError);
      expect(() => tg.logSoftmax(x)).toThrow(tg.DTypeError);
    }
  });

  it('a dim out of range -> ShapeError (0-d tensors accept only 0 and -1, like torch)', () => {
    const x = tg.zeros([2, 3, 4]);
    for (const dim of [3, -4, 1.5]) expect(() => tg.softmax(x, dim)).toThrow(tg.ShapeError);
    const s = tg.tensor(1);
    for (const dim of [1, -2]) {
      expect(() => s.softmax(dim)).toThrow(tg.ShapeError);
      expect(() => s.logSoftmax(dim)).toThrow(tg.ShapeError);
    }
  });

  it('CPU values: softmax([1,2,3]), a row of ties, all -Inf -> NaN', async () => {
    const z = Math.E + Math.E ** 2 + Math.E ** 3;
    expectClose(await tg.tensor([1, 2, 3]).softmax().toArray(), [Math.E / z, Math.E ** 2 / z, Math.E ** 3 / z], { atol: 0, rtol: 1e-7 });
    expectClose(await tg.full([5], 7).logSoftmax().toArray(), new Array(5).fill(-Math.log(5)), { atol: 0, rtol: 1e-7 });
    expect(Array.from(await tg.full([3], -Infinity).softmax().toArray()).every(Number.isNaN)).toBe(true);
  });
});
