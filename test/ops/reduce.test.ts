// Reductions (sum mean max min argmax argmin) on WebGPU against the CPU backend: every dim (negative too), keepdim,
// all elements; reduced lengths 1, 3, 257 with inner dims > 1; packed f16/bf16 outputs with odd counts. Lengths 4097
// and 65537 and strided inputs: reduce-long.test.ts; integer/bool/fp8 inputs, ties, NaN, empty dims:
// reduce-special.test.ts.
import { describe, expect, it } from 'vitest';
import { setDefaultDevice } from '../../src/index.js';
import { checkBoth, randomTensor } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { REDUCE, reduceFn, reduceTol } from './reduce-ops.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

describe.skipIf(!gpu.available)(`reductions over every dim, WebGPU vs CPU ${gpu.skipReason}`, () => {
  it.each(['float32', 'float16', 'bfloat16'] as const)('every op, every dim (incl. negative), keepdim and all-elements, %s', async (dtype) => {
    const x = randomTensor([4, 5, 7], dtype);
    for (const op of REDUCE) {
      for (const dim of [0, 1, 2, -1, -2, -3, undefined]) {
        for (const keepdim of [false, true]) {
          const r = await checkBoth([x], reduceFn(op, dim, keepdim), reduceTol(op, dtype, 140), `${op}(${dim}, keepdim ${keepdim}) ${dtype}`);
          const full = [4, 5, 7];
          const want =
            dim === undefined
              ? keepdim
                ? [1, 1, 1]
                : []
              : keepdim
                ? full.map((s, i) => (i === (dim + 3) % 3 ? 1 : s))
                : full.filter((_, i) => i !== (dim + 3) % 3);
          expect(r.shape, `${op} dim ${dim}`).toEqual(want);
          expect(r.dtype).toBe(op.startsWith('arg') ? 'int64' : dtype);
        }
      }
    }
  });

  it('a 0-d input reduces to itself (dim undefined, 0 or -1)', async () => {
    const x = randomTensor([], 'float32');
    for (const op of REDUCE) {
      for (const dim of [undefined, 0, -1]) {
        const r = await checkBoth([x], reduceFn(op, dim), reduceTol(op, 'float32', 1), `${op}(${dim})`);
        expect(r.shape).toEqual([]);
      }
    }
  });

  it.each([1, 3, 257])('reduced length %i with outer and inner dims > 1, f32/f16/bf16', async (len) => {
    for (const dtype of ['float32', 'float16', 'bfloat16'] as const) {
      const x = randomTensor([3, len, 5], dtype);
      // Reducing the short last dim instead: as many outputs as rows.
      const rows = randomTensor([3, Math.min(len, 67), 5], dtype);
      for (const op of REDUCE) {
        await checkBoth([x], reduceFn(op, 1), reduceTol(op, dtype, len), `${op} len ${len} ${dtype}`);
        await checkBoth([rows], reduceFn(op, -1), reduceTol(op, dtype, 5), `${op} last dim ${dtype}`);
      }
    }
  });

  it('f16/bf16 output packing with odd output counts; a couple of thousand outputs', async () => {
    for (const dtype of ['float16', 'bfloat16'] as const) {
      for (const shape of [
        [5, 33, 7],
        [3, 257],
        [1, 9],
        [35, 2],
      ]) {
        const x = randomTensor(shape, dtype);
        for (const op of ['sum', 'mean', 'max', 'min'] as const) {
          const r = await checkBoth([x], reduceFn(op, 1), reduceTol(op, dtype, shape[1]), `${op} ${dtype} ${JSON.stringify(shape)}`);
          expect(r.cpu.length % 2 === 1 || r.cpu.length === 2).toBe(true);
        }
      }
    }
    const wide = randomTensor([2001, 2], 'float32');
    await checkBoth([wide], reduceFn('sum', 1), reduceTol('sum', 'float32', 2), '2001 outputs');
    await checkBoth([wide], reduceFn('argmax', 1), reduceTol('argmax', 'float32', 2), '2001 outputs argmax');
  });

  it('many outputs of 65..1024 values take the one-invocation-per-output path (>= 4096 outputs), inner 1 and > 1', async () => {
    // Every op at one shape; at the 1024/1025 boundary and with inner > 1, a sum and an argmax.
    for (const [shape, dim, ops] of [
      [[4097, 129], 1, REDUCE],
      [[2, 300, 2050], 1, ['sum', 'argmax']],
      [[4096, 1024], 1, ['sum', 'argmax']],
      [[4096, 1025], 1, ['max']],
    ] as const) {
      const x = randomTensor([...shape], 'bfloat16');
      for (const op of ops) {
        await checkBoth([x], reduceFn(op, dim), reduceTol(op, 'bfloat16', shape[dim]), `${op} ${JSON.stringify(shape)} dim ${dim}`);
      }
    }
  });
});
