// The contiguous 32-bit fast path of the elementwise kernels (elementwise-linear.wgsl, 4 words an invocation; no tail
// code where every buffer holds the last vec4, an unrolled tail otherwise) on WebGPU vs CPU: sizes that are not multiples of 4 words or of the workgroup, views starting at offsets that are not
// multiples of 4 (bound as words, not vec4s), broadcast elements and JS numbers, special values, empty tensors; and
// that packed outputs (f16/bf16/uint8/bool) and strided inputs still take the strided kernel. Which kernel ran is
// read from gpuCounters().byKernel ('map-linear' vs 'map'), never from timings.
import { afterEach, describe, expect, it } from 'vitest';
import * as tg from '../../src/index.js';
import { gpuCounters, setDefaultDevice, synchronize, tensor, type DType, type Tensor } from '../../src/index.js';
import { elementwiseTuning } from '../../src/runtime/webgpu/kernels/elementwise.js';
import { BITS, checkBoth, expectClose, randomTensor, tolerance } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';
import { UNARY, type UnaryName } from './elementwise-ops.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu'); // inputs are made on the CPU and copied to WebGPU by checkBoth

afterEach(() => {
  elementwiseTuning.linearFastPath = true;
  elementwiseTuning.loopTail = false;
});

/** Dispatches of the fast ('map-linear') and the strided ('map') elementwise kernels while `run` ran. */
async function kernelsDuring(run: () => Promise<unknown>): Promise<{ fast: number; strided: number }> {
  await synchronize();
  const before = gpuCounters().byKernel;
  await run();
  await synchronize();
  const after = gpuCounters().byKernel;
  const delta = (k: string) => (after[k] ?? 0) - (before[k] ?? 0);
  return { fast: delta('map-linear'), strided: delta('map') };
}

// 1..7 cover every tail length; 255/257/1023/1025 straddle one and four workgroups of 4-word invocations.
const SIZES = [1, 2, 3, 4, 5, 7, 255, 256, 257, 1023, 1024, 1025, 4097];

describe.skipIf(!gpu.available)(`elementwise fast path (contiguous, 32-bit), WebGPU vs CPU ${gpu.skipReason}`, () => {
  it('binary f32 and int32 at sizes that are not multiples of 4 words or of the workgroup', async () => {
    for (const n of SIZES) {
      for (const dtype of ['float32', 'int32'] as const) {
        const x = randomTensor([n], dtype);
        const y = randomTensor([n], dtype);
        const k = await kernelsDuring(async () => {
          for (const op of ['add', 'sub', 'mul', 'maximum', 'minimum'] as const) {
            await checkBoth([x, y], (a, b) => tg[op](a, b), BITS, `${op} ${dtype} [${n}]`);
          }
        });
        expect(k, `${dtype} [${n}]`).toEqual({ fast: 5, strided: 0 });
      }
    }
  });

  it('the three tail forms (none: whole last vec4; unrolled: unaligned views; loop: the bench baseline) agree with the CPU', async () => {
    // Aligned buffers take the tail-free form, views at offsets that are not multiples of 4 the unrolled one.
    for (const loopTail of [false, true]) {
      elementwiseTuning.loopTail = loopTail;
      for (const n of [1, 2, 3, 5, 6, 7, 1022, 1023, 1025]) {
        const x = randomTensor([n + 3], 'float32');
        const y = randomTensor([n + 3], 'float32');
        await checkBoth([x, y], (a, b) => a.narrow(0, 0, n).mul(b.narrow(0, 0, n)), BITS, `aligned [${n}] loopTail ${loopTail}`);
        await checkBoth([x, y], (a, b) => a.narrow(0, 3, n).sub(b.narrow(0, 1, n)), BITS, `unaligned [${n}] loopTail ${loopTail}`);
        await checkBoth([x], (a) => a.narrow(0, 0, n).add(1.5), BITS, `x + 1.5 [${n}] loopTail ${loopTail}`);
      }
    }
  });

  it('every unary op on f32 matches the CPU and the strided kernel bit for bit', async () => {
    for (const op of Object.keys(UNARY) as UnaryName[]) {
      const spec = UNARY[op];
      const x = randomTensor([1029], 'float32', spec.dist, spec.scale);
      const fast = await checkBoth([x], spec.fn, tolerance('float32', spec.kind), `${op} fast`);
      elementwiseTuning.linearFastPath = false;
      const strided = await checkBoth([x], spec.fn, tolerance('float32', spec.kind), `${op} strided`);
      elementwiseTuning.linearFastPath = true;
      expectClose(fast.gpu, strided.gpu, BITS, `${op}: fast vs strided kernel`);
    }
  });

  it('contiguous views at offsets that are not multiples of 4 (word bindings) and that are (vec4 bindings)', async () => {
    const x = randomTensor([300], 'float32');
    const y = randomTensor([300], 'float32');
    for (const [offX, offY, len] of [
      [1, 2, 257],
      [3, 0, 5],
      [4, 8, 13],
      [0, 5, 295],
      [7, 7, 1],
      [2, 6, 290],
    ]) {
      const k = await kernelsDuring(() =>
        checkBoth([x, y], (a, b) => a.narrow(0, offX, len).add(b.narrow(0, offY, len)), BITS, `x[${offX}:] + y[${offY}:] (${len})`),
      );
      expect(k.fast, `offsets ${offX}/${offY}`).toBe(1);
      await checkBoth([x], (a) => a.narrow(0, offX, len).exp(), tolerance('float32', 'transcendental'), `exp(x[${offX}:]) (${len})`);
    }
    // A row of a matrix: contiguous after coalescing, starting mid-buffer.
    const m = randomTensor([9, 37], 'float32');
    await checkBoth([m], (a) => a.narrow(0, 3, 5).mul(a.narrow(0, 1, 5)), BITS, 'rows 3..7 * rows 1..5 of [9, 37]');
  });

  it('a broadcast element, a 0-d tensor and a JS number as the other operand', async () => {
    for (const n of [3, 6, 1025]) {
      const x = randomTensor([n], 'float32');
      const s = randomTensor([1], 'float32');
      const z = randomTensor([], 'float32');
      const k = await kernelsDuring(async () => {
        await checkBoth([x, s], (a, b) => a.sub(b), BITS, `x - [1] (${n})`);
        await checkBoth([x, z], (a, b) => b.div(a), BITS, `0-d / x (${n})`);
        await checkBoth([x], (a) => a.mul(-2.5), BITS, `x * -2.5 (${n})`);
        await checkBoth([x], (a) => tg.maximum(0.25, a), BITS, `max(0.25, x) (${n})`);
      });
      expect(k, `[${n}]`).toEqual({ fast: 4, strided: 0 });
      const i = randomTensor([n], 'int32');
      await checkBoth([i], (a) => a.add(7), BITS, `int32 + 7 (${n})`);
    }
  });

  it('NaN, +-Inf and -0 (and copies keep NaN payloads)', async () => {
    const nan = Number.NaN;
    const inf = Number.POSITIVE_INFINITY;
    const xs = [nan, inf, -inf, -0, 0, 1, -1, 3.5, inf, nan, -0];
    const ys = [1, -inf, -inf, 0, -0, nan, inf, -3.5, inf, 2, -0];
    const x = tensor(xs, { shape: [xs.length], device: 'cpu' });
    const y = tensor(ys, { shape: [ys.length], device: 'cpu' });
    for (const op of ['add', 'sub', 'mul', 'div', 'maximum', 'minimum'] as const) {
      await checkBoth([x, y], (a, b) => tg[op](a, b), BITS, `${op} with specials`);
    }
    await checkBoth([x], (a) => a.exp(), tolerance('float32', 'transcendental'), 'exp with specials');
    await checkBoth([x], (a) => a.relu(), BITS, 'relu with specials');
    // A quiet NaN with a payload: a same-dtype copy (a kernel or a buffer copy) moves the code as it is.
    const payload = new Float32Array(new Uint32Array([0x7fc00123, 0xffc00001, 0x3f800000, 0x7f800000, 0x80000000]).buffer);
    const p = tensor(Array.from(payload), { shape: [5], device: 'cpu' });
    const bits = (t: Float32Array | Int32Array | Uint8Array) => Array.from(new Uint32Array(new Float32Array(t).buffer));
    const g = await p.to('webgpu');
    try {
      const c = g.narrow(0, 1, 4).contiguous();
      const got = bits(await c.toArray());
      c.dispose();
      expect(got.map((b) => b.toString(16))).toEqual(bits(payload.subarray(1)).map((b) => b.toString(16)));
    } finally {
      g.dispose();
    }
  });

  it('casts between 32-bit dtypes (f32 <-> int32), including NaN/Inf to int32', async () => {
    const x = tensor([1.5, -2.5, Number.NaN, Number.POSITIVE_INFINITY, -3e9, 7], { shape: [6], device: 'cpu' });
    const i = randomTensor([1027], 'int32');
    const k = await kernelsDuring(async () => {
      await checkBoth([x], (a) => a.to('int32'), BITS, 'f32 -> int32');
      await checkBoth([i], (a) => a.to('float32'), BITS, 'int32 -> f32');
    });
    expect(k).toEqual({ fast: 2, strided: 0 });
  });

  it('empty tensors dispatch nothing', async () => {
    const x = randomTensor([0], 'float32');
    const k = await kernelsDuring(async () => {
      const r = await checkBoth([x, x], (a, b) => a.add(b), BITS, 'empty add');
      expect(r.shape).toEqual([0]);
      await checkBoth([x], (a) => a.mul(3), BITS, 'empty * 3');
    });
    expect(k).toEqual({ fast: 0, strided: 0 });
  });

  it('packed outputs and inputs (f16, bf16, uint8, bool) and strided inputs take the strided kernel', async () => {
    const cases: [string, DType[], (...t: Tensor[]) => Tensor][] = [
      ['f16 + f16', ['float16', 'float16'], (a, b) => a.add(b)],
      ['bf16 * bf16', ['bfloat16', 'bfloat16'], (a, b) => a.mul(b)],
      ['f32 -> f16', ['float32'], (a) => a.to('float16')],
      ['f32 -> bf16', ['float32'], (a) => a.to('bfloat16')],
      ['f16 + f32 -> f32', ['float16', 'float32'], (a, b) => a.add(b)],
      ['f32 < f32 -> bool', ['float32', 'float32'], (a, b) => a.lt(b)],
      ['uint8 + uint8', ['uint8', 'uint8'], (a, b) => a.add(b)],
      ['f32 transposed', ['float32', 'float32'], (a, b) => a.reshape([5, 7]).T.add(b.reshape([7, 5]))],
    ];
    for (const [label, dtypes, fn] of cases) {
      for (const n of [35, 1025 * 35]) {
        if (label === 'f32 transposed' && n !== 35) continue;
        const inputs = dtypes.map((d) => randomTensor([n], d));
        const k = await kernelsDuring(() => checkBoth(inputs, fn, dtypes.includes('bfloat16') ? tolerance('bfloat16') : BITS, `${label} [${n}]`));
        expect(k, label).toEqual({ fast: 0, strided: 1 });
      }
    }
  });
});
