// Elementwise edge cases on WebGPU vs CPU: strided inputs (transpose, stepped slices, narrows that start mid-word in
// packed f16/uint8 storage, expand, permute), empty tensors, and special values (NaN, +-Inf, -0) checked against
// hand-written expectations on both devices.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice, type DType, type Tensor } from '../../src/index.js';
import { BITS, checkBoth, expectClose, randomTensor, tolerance, type Tolerance } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { BINARY, binaryFn, binaryOutDtype, COMPARISON, UNARY, type UnaryName } from './elementwise-ops.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu'); // inputs are made on the CPU and copied to WebGPU by checkBoth

/** Runs fn on both devices and checks each result against hand-written values (and their dtype). */
async function expectOnBoth(
  inputs: Tensor[],
  fn: (...xs: Tensor[]) => Tensor,
  want: number[],
  tol: Tolerance | 'bits',
  label: string,
  dtype?: DType,
): Promise<void> {
  const r = await checkBoth(inputs, fn, tol, label);
  if (dtype) expect(r.dtype, label).toBe(dtype);
  expectClose(r.cpu, want, tol, `${label} (CPU vs hand-written)`);
  expectClose(r.gpu, want, tol, `${label} (WebGPU vs hand-written)`);
}

describe.skipIf(!gpu.available)(`elementwise on strided views, WebGPU vs CPU ${gpu.skipReason}`, () => {
  it('transposed inputs: unary, binary with one and with both operands transposed', async () => {
    for (const dtype of ['float32', 'float16', 'bfloat16', 'int32', 'uint8'] as const) {
      const x = randomTensor([5, 7], dtype);
      const y = randomTensor([7, 5], dtype);
      const tol = tolerance(dtype, 'transcendental');
      await checkBoth([x], (t) => t.T.abs(), tol, `abs(x.T) ${dtype}`);
      await checkBoth([x, y], (a, b) => a.T.sub(b), tol, `x.T - y ${dtype}`);
      await checkBoth([x, y], (a, b) => a.maximum(b.T), tol, `max(x, y.T) ${dtype}`);
      await checkBoth([x, y], (a, b) => a.T.T.mul(b.T), tol, `x.T.T * y.T ${dtype}`);
      await checkBoth([x, y], (a, b) => a.T.lt(b), 'bits', `x.T < y ${dtype}`);
    }
    const x = randomTensor([33, 65], 'float32', 'positive');
    for (const op of Object.keys(UNARY) as UnaryName[]) {
      await checkBoth([x], (t) => UNARY[op].fn(t.T), tolerance('float32', UNARY[op].kind), `${op}(x.T)`);
    }
  });

  it('stepped slices and narrows that start mid-word (f16: 2 per word, uint8/bool: 4 per word)', async () => {
    for (const dtype of ['float16', 'bfloat16', 'uint8', 'bool', 'float32', 'int32'] as const) {
      const x = randomTensor([4097], dtype);
      const y = randomTensor([4097], dtype);
      const tol = tolerance(binaryOutDtype('add', dtype));
      for (const start of [1, 2, 3]) {
        // Odd starts land inside a word; lengths odd so the last output word is half full.
        await checkBoth([x], (t) => t.narrow(0, start, 257).eq(t.narrow(0, start + 1, 257)), 'bits', `narrow eq ${dtype} @${start}`);
        if (dtype === 'bool') continue;
        await checkBoth([x, y], (a, b) => a.narrow(0, start, 257).add(b.narrow(0, 4097 - 257 - start, 257)), tol, `narrow add ${dtype} @${start}`);
        await checkBoth([x], (t) => t.narrow(0, start, 1001).neg(), tol, `narrow neg ${dtype} @${start}`);
        await checkBoth([x], (t) => t.slice(0, start, undefined, 3).abs(), tol, `slice step 3 ${dtype} @${start}`);
        await checkBoth(
          [x, y],
          (a, b) => a.slice(0, start, -start, 5).mul(b.slice(0, start + 1, undefined, 5).narrow(0, 0, Math.ceil((4097 - 2 * start) / 5))),
          tol,
          `slice*slice ${dtype}`,
        );
      }
    }
  });

  it('narrowed 2-D views (row offsets mid-word) and select', async () => {
    for (const dtype of ['float16', 'uint8', 'float32'] as const) {
      const x = randomTensor([9, 13], dtype);
      const tol = tolerance(dtype, 'simple');
      await checkBoth([x], (t) => t.narrow(1, 1, 11).narrow(0, 3, 5).neg(), tol, `narrow2d ${dtype}`);
      await checkBoth([x], (t) => t.select(1, 5).add(t.select(0, 3).narrow(0, 0, 9)), tol, `select ${dtype}`);
      await checkBoth([x], (t) => t.T.narrow(0, 3, 7).mul(t.narrow(1, 5, 1).T.expand(7, 9)), tol, `mixed views ${dtype}`);
    }
  });

  it('expanded (stride-0) and permuted inputs', async () => {
    for (const dtype of ['float32', 'float16', 'uint8'] as const) {
      const col = randomTensor([3, 1], dtype);
      const z = randomTensor([3, 5], dtype);
      const cube = randomTensor([2, 3, 4], dtype);
      const w = randomTensor([4, 2, 3], dtype);
      const tol = tolerance(dtype, 'transcendental');
      await checkBoth([col, z], (c, b) => c.expand(3, 5).add(b), tol, `expand add ${dtype}`);
      await checkBoth([col], (c) => c.expand(4, 3, 7).relu(), tol, `expand relu ${dtype}`);
      await checkBoth([col], (c) => c.T.expand(6, 3).exp(), tol, `expand exp ${dtype}`);
      await checkBoth([cube, w], (a, b) => a.permute(2, 0, 1).sub(b), tol, `permute sub ${dtype}`);
      await checkBoth([cube, w], (a, b) => a.permute(1, 2, 0).maximum(b.permute(2, 0, 1)), tol, `permute max ${dtype}`);
      await checkBoth([cube], (a) => a.transpose(0, 2).abs(), tol, `transpose(0,2) ${dtype}`);
    }
  });

  it('views of results and results of views stay consistent over several chained ops', async () => {
    const x = randomTensor([8, 33], 'float16');
    await checkBoth(
      [x],
      (t) =>
        t.T.mul(2)
          .slice(0, 1, undefined, 2)
          .add(t.narrow(1, 3, 16).T)
          .sigmoid().T,
      tolerance('float16', 'transcendental'),
    );
  });
});

describe.skipIf(!gpu.available)(`elementwise on empty tensors, WebGPU vs CPU ${gpu.skipReason}`, () => {
  it.each([[[0]], [[3, 0]], [[0, 5]]])('unary and binary on %j give the same empty shape', async (shape) => {
    for (const dtype of ['float32', 'float16', 'uint8'] as const) {
      const x = randomTensor(shape, dtype);
      for (const op of ['neg', 'exp', 'relu'] as const) {
        const r = await checkBoth([x], UNARY[op].fn, tolerance('float32'), `${op} ${dtype}`);
        expect(r.shape).toEqual(shape);
        expect(r.cpu.length).toBe(0);
      }
      for (const op of BINARY) {
        const r = await checkBoth([x, x], binaryFn(op), tolerance('float32'), `${op} ${dtype}`);
        expect(r.shape).toEqual(shape);
      }
    }
  });

  it('broadcasting with an empty dim: [0] + [1], [3, 0] + [3, 1], [3, 0] * []', async () => {
    const cases: [number[], number[], number[]][] = [
      [[0], [1], [0]],
      [
        [3, 0],
        [3, 1],
        [3, 0],
      ],
      [[3, 0], [], [3, 0]],
      [
        [1, 0],
        [4, 1],
        [4, 0],
      ],
    ];
    for (const [sa, sb, out] of cases) {
      const r = await checkBoth([randomTensor(sa), randomTensor(sb)], (a, b) => a.mul(b), tolerance('float32'));
      expect(r.shape).toEqual(out);
    }
  });
});

const NAN = NaN;
const INF = Infinity;

describe.skipIf(!gpu.available)(`special values (NaN, Inf, -0), WebGPU vs CPU vs hand-written ${gpu.skipReason}`, () => {
  const inputs = [100, -100, 0, -0, -1, INF, -INF, NAN, 0.5];
  const tol: Tolerance = { atol: 1e-30, rtol: 2e-6 };
  // Expected float32 results for each input above (exact where IEEE defines them; values rounded as f32 later).
  const want: Partial<Record<UnaryName, number[]>> = {
    exp: [INF, Math.fround(Math.exp(-100)), 1, 1, Math.exp(-1), INF, 0, NAN, Math.exp(0.5)],
    log: [Math.log(100), NAN, -INF, -INF, NAN, INF, NAN, NAN, Math.log(0.5)],
    sqrt: [10, NAN, 0, -0, NAN, INF, NAN, NAN, Math.SQRT1_2],
    rsqrt: [0.1, NAN, INF, -INF, NAN, 0, NAN, NAN, Math.SQRT2],
    tanh: [1, -1, 0, -0, Math.tanh(-1), 1, -1, NAN, Math.tanh(0.5)],
    sigmoid: [1, 0, 0.5, 0.5, 1 / (1 + Math.E), 1, 0, NAN, 1 / (1 + Math.exp(-0.5))],
    relu: [100, 0, 0, 0, 0, INF, 0, NAN, 0.5],
    abs: [100, 100, 0, 0, 1, INF, INF, NAN, 0.5],
    neg: [-100, 100, -0, 0, 1, -INF, INF, NAN, -0.5],
    silu: [100, -0, 0, -0, -1 / (1 + Math.E), INF, NAN, NAN, 0.5 / (1 + Math.exp(-0.5))],
  };
  it.each(Object.keys(want) as UnaryName[])('%s of 100, -100, 0, -0, -1, Inf, -Inf, NaN, 0.5', async (op) => {
    // exp(-100) and silu(-100) are f32 subnormal / tiny: the GPU may flush them to 0.
    const slack: Tolerance = { atol: 1e-37, rtol: op === 'silu' || op === 'tanh' || op === 'sigmoid' ? 1e-5 : tol.rtol };
    await expectOnBoth([tg.tensor(inputs)], UNARY[op].fn, want[op]!, slack, op, 'float32');
  });

  it('gelu (both forms) and the remaining transcendental ops agree with the CPU on specials, f32/f16/bf16', async () => {
    for (const dtype of ['float32', 'float16', 'bfloat16'] as const) {
      const x = tg.tensor([...inputs, 12, -12, 1e4, -1e4, 88.5, -88.5], { dtype });
      for (const op of Object.keys(UNARY) as UnaryName[]) {
        await checkBoth([x], UNARY[op].fn, tolerance(dtype, 'transcendental'), `${op} ${dtype}`);
      }
    }
  });

  it('exp overflows to Inf in f16/bf16 ranges; log of 0 is -Inf in every float dtype', async () => {
    await expectOnBoth(
      [tg.tensor([12, 11, -20], { dtype: 'float16' })],
      (t) => t.exp(),
      [INF, Math.exp(11), Math.exp(-20)],
      tolerance('float16'),
      'exp f16',
      'float16',
    );
    await expectOnBoth([tg.tensor([89, 88, -0], { dtype: 'bfloat16' })], (t) => t.exp(), [INF, Math.exp(88), 1], tolerance('bfloat16'), 'exp bf16', 'bfloat16');
    for (const dtype of ['float16', 'bfloat16', 'uint8', 'bool', 'int32'] as const) {
      await expectOnBoth([tg.tensor([0, 1], { dtype })], (t) => t.log(), [-INF, 0], tolerance('float32'), `log ${dtype}`);
    }
    await expectOnBoth([tg.tensor(new Int32Array([-4, 4, 0]))], (t) => t.log(), [NAN, Math.log(4), -INF], tolerance('float32'), 'log int32');
    await expectOnBoth([tg.tensor(new Int32Array([-4, 4, 0]))], (t) => t.sqrt(), [NAN, 2, 0], tolerance('float32'), 'sqrt int32');
    await expectOnBoth([tg.tensor(new Int32Array([-4, 4, 0]))], (t) => t.rsqrt(), [NAN, 0.5, INF], tolerance('float32'), 'rsqrt int32');
  });

  it('-0 survives neg, mul and copies bit-exactly; abs(-0) is +0', async () => {
    const x = tg.tensor([0, -0, 1.5, -2]);
    await expectOnBoth([x], (t) => t.neg(), [-0, 0, -1.5, 2], BITS, 'neg');
    await expectOnBoth([x], (t) => t.abs(), [0, 0, 1.5, 2], BITS, 'abs');
    await expectOnBoth([x], (t) => t.mul(-1), [-0, 0, -1.5, 2], BITS, 'mul -1');
    await expectOnBoth([x], (t) => t.clone(), [0, -0, 1.5, -2], BITS, 'clone');
    await expectOnBoth([tg.tensor([0, -0], { dtype: 'float16' })], (t) => t.neg(), [-0, 0], BITS, 'neg f16');
  });

  it('maximum/minimum propagate NaN from either side; comparisons with NaN are false except ne', async () => {
    const a = tg.tensor([NAN, 1, NAN, INF, -INF, 2, -0]);
    const b = tg.tensor([1, NAN, NAN, INF, INF, -INF, 0]);
    await expectOnBoth([a, b], (x, y) => x.maximum(y), [NAN, NAN, NAN, INF, INF, 2, 0], tolerance('float32'), 'maximum');
    await expectOnBoth([a, b], (x, y) => x.minimum(y), [NAN, NAN, NAN, INF, -INF, -INF, 0], tolerance('float32'), 'minimum');
    const cmp: Record<string, number[]> = {
      eq: [0, 0, 0, 1, 0, 0, 1],
      ne: [1, 1, 1, 0, 1, 1, 0],
      lt: [0, 0, 0, 0, 1, 0, 0],
      le: [0, 0, 0, 1, 1, 0, 1],
      gt: [0, 0, 0, 0, 0, 1, 0],
      ge: [0, 0, 0, 1, 0, 1, 1],
    };
    for (const op of COMPARISON) await expectOnBoth([a, b], binaryFn(op), cmp[op], 'bits', op, 'bool');
    // The same in f16 and bf16 (NaN codes decode to NaN on the GPU too).
    for (const dtype of ['float16', 'bfloat16'] as const) {
      const [ha, hb] = [a.to(dtype), b.to(dtype)];
      for (const op of COMPARISON) await expectOnBoth([ha, hb], binaryFn(op), cmp[op], 'bits', `${op} ${dtype}`, 'bool');
      await expectOnBoth([ha, hb], (x, y) => x.maximum(y), [NAN, NAN, NAN, INF, INF, 2, 0], tolerance(dtype), `maximum ${dtype}`, dtype);
    }
  });

  it('division by zero, Inf - Inf, 0 * Inf, and f16 overflow', async () => {
    const a = tg.tensor([1, -1, 0, INF, INF, 0, 3]);
    const b = tg.tensor([0, 0, 0, INF, -INF, INF, -0]);
    await expectOnBoth([a, b], (x, y) => x.div(y), [INF, -INF, NAN, NAN, NAN, 0, -INF], tolerance('float32'), 'div');
    await expectOnBoth([a, b], (x, y) => x.add(y), [1, -1, 0, INF, NAN, INF, 3], tolerance('float32'), 'add');
    await expectOnBoth([a, b], (x, y) => x.mul(y), [0, -0, 0, INF, -INF, NAN, -0], tolerance('float32'), 'mul');
    const h = tg.tensor([300, 65504, 255, -300], { dtype: 'float16' });
    await expectOnBoth([h], (x) => x.mul(x), [INF, INF, 65024, INF], tolerance('float16'), 'f16 square overflows', 'float16');
    await expectOnBoth([h], (x) => x.add(16), [316, INF, 271, -284], tolerance('float16'), 'f16 65504 + 16 rounds to Inf', 'float16');
    const i = tg.tensor(new Int32Array([1, -1, 0]));
    await expectOnBoth([i, tg.tensor(new Int32Array([0, 0, 0]))], (x, y) => x.div(y), [INF, -INF, NAN], tolerance('float32'), 'int / 0', 'float32');
  });
});
