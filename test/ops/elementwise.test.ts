// Every elementwise op on WebGPU against the CPU backend: each float dtype and the integer dtypes an op takes,
// sizes that are not multiples of the workgroup (and odd counts for packed 16- and 8-bit outputs). Scalar
// operands, broadcasting and dtype promotion: elementwise-mixed.test.ts; views, empty tensors and special values:
// elementwise-edge.test.ts.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice, type DType } from '../../src/index.js';
import { checkBoth, randomTensor, tolerance, type Distribution } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { ARITHMETIC, BINARY, binaryFn, binaryOutDtype, COMPARISON, UNARY, type UnaryName, type UnarySpec } from './elementwise-ops.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu'); // inputs are made on the CPU and copied to WebGPU by checkBoth

const SIZES = [1, 3, 257, 4097];

describe.skipIf(!gpu.available)(`elementwise unary on WebGPU vs CPU ${gpu.skipReason}`, () => {
  it('gelu() defaults to the exact (erf) form', async () => {
    const x = randomTensor([257], 'float32', 'normal', 3);
    await checkBoth([x], (t) => t.gelu().sub(t.gelu({ approximate: 'none' })), { atol: 0, rtol: 0 });
    const diff = await x
      .gelu()
      .sub(x.gelu({ approximate: 'tanh' }))
      .abs()
      .max()
      .item();
    expect(diff).toBeGreaterThan(1e-5); // the two forms really differ
  });

  for (const [name, spec] of Object.entries(UNARY) as [UnaryName, UnarySpec][]) {
    it.each(['float32', 'float16', 'bfloat16'] as const)(`${name} %s, sizes ${SIZES.join('/')}`, async (dtype) => {
      for (const n of SIZES) {
        const x = randomTensor([n], dtype, spec.dist, spec.scale);
        const r = await checkBoth([x], spec.fn, tolerance(dtype, spec.kind), `${name} ${dtype} [${n}]`);
        expect(r.dtype).toBe(dtype);
        x.dispose();
      }
    });

    it.each(['int32', 'uint8', 'bool'] as const)(`${name} %s`, async (dtype) => {
      const x = randomTensor([257], dtype, spec.dist, spec.scale);
      if (dtype === 'bool' && spec.keepsInt) {
        expect(() => spec.fn(x)).toThrow(tg.DTypeError);
        return;
      }
      const out = spec.keepsInt ? dtype : 'float32';
      const r = await checkBoth([x], spec.fn, tolerance(out, spec.kind), `${name} ${dtype}`);
      expect(r.dtype).toBe(out);
    });
  }

  it('neg/abs/relu of int32 wrap like two-complement integers, uint8 wraps mod 256', async () => {
    const i = tg.tensor(new Int32Array([-2147483648, 2147483647, -5, 0, 7]));
    expect(Array.from((await checkBoth([i], (t) => t.neg(), 'bits')).cpu)).toEqual([-2147483648, -2147483647, 5, 0, -7]);
    expect(Array.from((await checkBoth([i], (t) => t.abs(), 'bits')).cpu)).toEqual([-2147483648, 2147483647, 5, 0, 7]);
    expect(Array.from((await checkBoth([i], (t) => t.relu(), 'bits')).cpu)).toEqual([0, 2147483647, 0, 0, 7]);
    const u = tg.tensor(new Uint8Array([0, 1, 2, 200, 255]));
    expect(Array.from((await checkBoth([u], (t) => t.neg(), 'bits')).cpu)).toEqual([0, 255, 254, 56, 1]);
  });
});

describe.skipIf(!gpu.available)(`elementwise binary on WebGPU vs CPU ${gpu.skipReason}`, () => {
  for (const op of BINARY) {
    const dtypes: DType[] = ['float32', 'float16', 'bfloat16', 'int32', 'uint8', ...(COMPARISON.includes(op) ? (['bool'] as DType[]) : [])];
    it.each(dtypes)(`${op} %s, sizes ${SIZES.join('/')}`, async (dtype) => {
      for (const n of SIZES) {
        // Coarse values (multiples of 1/4) tie often, so eq/le/ge see equal pairs; divisors are never 0.
        const dist: Distribution = COMPARISON.includes(op) ? 'coarse' : 'normal';
        const a = randomTensor([n], dtype, dist, 2);
        const b = randomTensor([n], dtype, dist, 2);
        const out = binaryOutDtype(op, dtype);
        const r = await checkBoth([a, b], binaryFn(op), tolerance(out, 'simple'), `${op} ${dtype} [${n}]`);
        expect(r.dtype).toBe(out);
        if (COMPARISON.includes(op) && n === 4097) {
          // Both outcomes occur, so a kernel stuck at 0 or 1 cannot pass.
          expect(r.cpu.some((v) => v === 1) && r.cpu.some((v) => v === 0)).toBe(true);
        }
        a.dispose();
        b.dispose();
      }
    });
  }

  it('bool arithmetic: mul/add/maximum/minimum are logical (bool result, as torch), sub/pow rejected, div float32; comparisons work', async () => {
    const a = randomTensor([9], 'bool');
    const b = randomTensor([9], 'bool');
    const logical = ['mul', 'add', 'maximum', 'minimum'];
    for (const op of ARITHMETIC.filter((o) => o !== 'div' && !logical.includes(o))) expect(() => binaryFn(op)(a, b), op).toThrow(tg.DTypeError);
    for (const op of logical) expect((await checkBoth([a, b], binaryFn(op as (typeof ARITHMETIC)[number]), 'bits')).dtype, op).toBe('bool');
    // True division of bools is float32 (torch.div likewise).
    expect((await checkBoth([a, b], (x, y) => x.div(y), tolerance('float32'))).dtype).toBe('float32');
    await checkBoth([a, b], (x, y) => x.ne(y), 'bits');
  });

  it('int32 add/sub/mul wrap on overflow; int32 division is true division in float32', async () => {
    const a = tg.tensor(new Int32Array([2147483647, -2147483648, 65536, 7, -7, 1]));
    const b = tg.tensor(new Int32Array([1, 1, 65536, 2, 2, 0]));
    expect(Array.from((await checkBoth([a, b], (x, y) => x.add(y), 'bits')).cpu)).toEqual([-2147483648, -2147483647, 131072, 9, -5, 1]);
    expect(Array.from((await checkBoth([a, b], (x, y) => x.sub(y), 'bits')).cpu)).toEqual([2147483646, 2147483647, 0, 5, -9, 1]);
    expect(Array.from((await checkBoth([a, b], (x, y) => x.mul(y), 'bits')).cpu)).toEqual([2147483647, -2147483648, 0, 14, -14, 0]);
    const q = await checkBoth([a.narrow(0, 2, 4), b.narrow(0, 2, 4)], (x, y) => x.div(y), tolerance('float32'));
    expect(q.dtype).toBe('float32');
    expect(Array.from(q.cpu)).toEqual([1, 3.5, -3.5, Infinity]);
  });

  it('uint8 arithmetic wraps mod 256', async () => {
    const a = tg.tensor(new Uint8Array([200, 3, 16, 255]));
    const b = tg.tensor(new Uint8Array([100, 5, 16, 255]));
    expect(Array.from((await checkBoth([a, b], (x, y) => x.add(y), 'bits')).cpu)).toEqual([44, 8, 32, 254]);
    expect(Array.from((await checkBoth([a, b], (x, y) => x.sub(y), 'bits')).cpu)).toEqual([100, 254, 0, 0]);
    expect(Array.from((await checkBoth([a, b], (x, y) => x.mul(y), 'bits')).cpu)).toEqual([32, 15, 0, 1]);
  });
});
