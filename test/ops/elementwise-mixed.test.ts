// Mixed operands on WebGPU vs CPU: JS numbers as either operand (PyTorch's wrapped-number rule: a number does not
// widen a tensor's dtype unless it is of a higher category), broadcasting across ranks, and dtype promotion.
import { describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { setDefaultDevice, type DType } from '../../src/index.js';
import { checkBoth, expectClose, randomTensor, tolerance, type Distribution } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { BINARY, binaryFn, binaryOutDtype, COMPARISON, type BinaryName } from './elementwise-ops.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu'); // inputs are made on the CPU and copied to WebGPU by checkBoth

describe.skipIf(!gpu.available)(`scalar operands on WebGPU vs CPU ${gpu.skipReason}`, () => {
  // [input dtype, op, scalar, scalar first?, result dtype]
  const cases: [DType, BinaryName, number, boolean, DType][] = [
    ['float32', 'add', 2.5, false, 'float32'],
    ['float32', 'sub', 2.5, true, 'float32'],
    ['float32', 'mul', -3, false, 'float32'],
    ['float32', 'div', 1, true, 'float32'],
    ['float32', 'maximum', 0.5, false, 'float32'],
    ['float32', 'minimum', 0.5, true, 'float32'],
    ['float32', 'lt', 0.25, false, 'bool'],
    ['float32', 'ge', 0.25, true, 'bool'],
    ['float16', 'add', 1 / 3, false, 'float16'],
    ['float16', 'div', 7, false, 'float16'],
    ['float16', 'sub', 1000, true, 'float16'],
    ['bfloat16', 'mul', 3, false, 'bfloat16'],
    ['bfloat16', 'sub', 0.1, true, 'bfloat16'],
    ['bfloat16', 'eq', 0.5, false, 'bool'],
    ['int32', 'add', 2, false, 'int32'],
    ['int32', 'mul', -3, true, 'int32'],
    ['int32', 'div', 2, false, 'float32'],
    ['int32', 'add', 0.5, false, 'float32'],
    ['int32', 'maximum', 10, false, 'int32'],
    ['int32', 'eq', 7, false, 'bool'],
    ['uint8', 'add', 300, false, 'uint8'],
    ['uint8', 'sub', 1, false, 'uint8'],
    ['uint8', 'sub', 1, true, 'uint8'],
    ['uint8', 'mul', 2.5, false, 'float32'],
    ['uint8', 'gt', 128, false, 'bool'],
    ['bool', 'add', 1, false, 'int32'],
    ['bool', 'mul', 2.5, false, 'float32'],
    ['bool', 'eq', 1, false, 'bool'],
  ];
  it.each(cases)('%s %s %d (scalar first: %s) -> %s', async (dtype, op, s, first, out) => {
    const x = randomTensor([257], dtype, COMPARISON.includes(op) ? 'coarse' : 'normal', 2);
    const f = binaryFn(op);
    const r = await checkBoth([x], (t) => (first ? f(s, t) : f(t, s)), tolerance(out, 'simple'));
    expect(r.dtype).toBe(out);
    // The CPU result is the op applied to the values, rounded to the result dtype.
    const xs = await x.toArray();
    const want = Array.from(xs, (v) => {
      const [p, q] = first ? [s, v] : [v, s];
      const raw = {
        add: p + q,
        sub: p - q,
        mul: p * q,
        div: p / q,
        maximum: Math.max(p, q),
        minimum: Math.min(p, q),
        eq: +(p === q),
        ne: +(p !== q),
        lt: +(p < q),
        le: +(p <= q),
        gt: +(p > q),
        ge: +(p >= q),
      }[op];
      return out === 'uint8' ? ((raw % 256) + 256) % 256 : raw;
    });
    const rounded = await tg.tensor(Array.from(want), { dtype: out, device: 'cpu' }).toArray();
    expectClose(r.cpu, rounded, tolerance(out, 'simple'), 'CPU vs values computed here');
  });
});

describe.skipIf(!gpu.available)(`broadcasting on WebGPU vs CPU ${gpu.skipReason}`, () => {
  const shapes: [number[], number[]][] = [
    [
      [3, 1],
      [1, 4],
    ],
    [[257], [33, 1]],
    [[1], [4097]],
    [[4097], [1]],
    [[], [257]],
    [[5, 3], []],
    [[], []],
    [
      [2, 1, 3],
      [4, 1],
    ],
    [
      [6, 1, 5],
      [7, 1, 1, 1],
    ],
  ];
  it.each(shapes)('%j op %j, every binary op, float32', async (sa, sb) => {
    for (const op of BINARY) {
      const dist: Distribution = COMPARISON.includes(op) ? 'coarse' : 'normal';
      const a = randomTensor(sa, 'float32', dist);
      const b = randomTensor(sb, 'float32', dist);
      await checkBoth([a, b], binaryFn(op), tolerance('float32'), `${op} ${JSON.stringify(sa)} ${JSON.stringify(sb)}`);
    }
  });

  it.each(['float16', 'bfloat16', 'int32', 'uint8'] as const)('broadcast add/mul/lt in %s', async (dtype) => {
    for (const [sa, sb] of shapes) {
      const a = randomTensor(sa, dtype, 'coarse');
      const b = randomTensor(sb, dtype, 'coarse');
      for (const op of ['add', 'mul', 'lt'] as const) {
        await checkBoth([a, b], binaryFn(op), tolerance(binaryOutDtype(op, dtype)), `${op} ${dtype} ${JSON.stringify(sa)} ${JSON.stringify(sb)}`);
      }
    }
  });

  it('[257] + [4097, 1] (a million outputs) in f16 and f32', async () => {
    for (const dtype of ['float16', 'float32'] as const) {
      const r = await checkBoth(
        [randomTensor([257], dtype), randomTensor([4097, 1], dtype)],
        (a, b) => a.add(b),
        tolerance(dtype),
        `[257] + [4097, 1] ${dtype}`,
      );
      expect(r.shape).toEqual([4097, 257]);
    }
  });

  it('0-d results have shape [] on both devices', async () => {
    const r = await checkBoth([randomTensor([]), randomTensor([])], (a, b) => a.mul(b), tolerance('float32'));
    expect(r.shape).toEqual([]);
  });
});

describe.skipIf(!gpu.available)(`dtype promotion on WebGPU vs CPU ${gpu.skipReason}`, () => {
  const pairs: [DType, DType, DType][] = [
    ['float16', 'bfloat16', 'float32'],
    ['float16', 'float32', 'float32'],
    ['bfloat16', 'float32', 'float32'],
    ['int32', 'float32', 'float32'],
    ['uint8', 'float16', 'float16'],
    ['int32', 'bfloat16', 'bfloat16'],
    ['uint8', 'int32', 'int32'],
    ['bool', 'float16', 'float16'],
    ['bool', 'uint8', 'uint8'],
    ['int32', 'bool', 'int32'],
  ];
  it.each(pairs)('%s with %s -> %s', async (da, db, out) => {
    expect(tg.promoteTypes(da, db)).toBe(out);
    for (const op of ['add', 'sub', 'mul', 'maximum', 'lt'] as const) {
      const a = randomTensor([4, 257], da, 'coarse');
      const b = randomTensor([257], db, 'coarse');
      const r = await checkBoth([a, b], binaryFn(op), tolerance(op === 'lt' ? 'bool' : out), `${op} ${da} ${db}`);
      expect(r.dtype).toBe(op === 'lt' ? 'bool' : out);
    }
  });
});
