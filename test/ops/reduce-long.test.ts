// Reductions over long rows (4097 and 65537 elements: many per invocation, then the workgroup tree) and over strided
// inputs (transposed, stepped, mid-word narrows of f16/uint8, expanded), WebGPU against the CPU backend.
import { describe, it } from 'vitest';
import { setDefaultDevice, type Tensor } from '../../src/index.js';
import { checkBoth, randomTensor } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { REDUCE, reduceFn, reduceTol } from './reduce-ops.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

describe.skipIf(!gpu.available)(`long and strided reductions, WebGPU vs CPU ${gpu.skipReason}`, () => {
  it.each([4097])('reduced length %i with outer and inner dims > 1, f32/f16/bf16', async (len) => {
    for (const dtype of ['float32', 'float16', 'bfloat16'] as const) {
      const x = randomTensor([3, len, 5], dtype);
      // bf16 differs from f16 only in its codec (covered at every length in reduce.test.ts): two ops suffice here.
      for (const op of dtype === 'bfloat16' ? (['sum', 'argmax'] as const) : REDUCE) {
        await checkBoth([x], reduceFn(op, 1), reduceTol(op, dtype, len), `${op} len ${len} ${dtype}`);
      }
    }
  });

  it('reduced length 65537 (more than 256 elements per invocation), inner dim 3 and innermost', async () => {
    const x = randomTensor([2, 65537, 3], 'float32');
    const y = randomTensor([65537], 'float16');
    for (const op of REDUCE) {
      await checkBoth([x], reduceFn(op, 1), reduceTol(op, 'float32', 65537), `${op} len 65537`);
      await checkBoth([y], reduceFn(op), reduceTol(op, 'float16', 65537), `${op} all 65537 f16`);
    }
    // A shifted input, so mean/sum are far from 0 and relative error is what is measured.
    await checkBoth([x], (t) => t.add(3).sum(1), { atol: 1e-3, rtol: 2e-6 }, 'sum of 3 + N(0,1) over 65537');
  });

  it('strided inputs: transposed, stepped slice, mid-word narrow (f16/uint8), expanded', async () => {
    for (const dtype of ['float32', 'float16', 'uint8'] as const) {
      const x = randomTensor([6, 257], dtype);
      const views: [string, (t: Tensor) => Tensor][] = [
        ['T', (t) => t.T],
        ['slice step 3', (t) => t.slice(1, 1, undefined, 3)],
        ['narrow odd', (t) => t.narrow(1, 1, 255)],
        ['narrow rows', (t) => t.narrow(0, 1, 3).narrow(1, 3, 101)],
        ['expand', (t) => t.narrow(0, 2, 1).expand(4, 257)],
        ['select', (t) => t.select(0, 3)],
      ];
      for (const [name, view] of views) {
        // Every op in f32; in the packed dtypes the ops that differ in how they combine (the kernel is one template).
        for (const op of dtype === 'float32' ? REDUCE : (['sum', 'max', 'argmin'] as const)) {
          for (const dim of [0, -1]) {
            await checkBoth([x], (t) => view(t)[op](dim), reduceTol(op, dtype, 257), `${op}(${dim}) of ${name} ${dtype}`);
          }
        }
      }
    }
  });
});
