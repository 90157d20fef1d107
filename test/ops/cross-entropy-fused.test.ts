// The fused crossEntropy (Backend.crossEntropyForward / crossEntropyBackward): WebGPU against the CPU oracle for the
// loss and d logits on fresh random inputs (rows longer than a workgroup and not a multiple of it, odd row counts,
// float16 / bfloat16 logits, strided and 3-D logits, ignored rows, every reduction), PyTorch's special values (a
// mean over no target is NaN, a NaN logit makes its row NaN, -Inf logits are fine), bad targets, the CPU gradient
// against central differences, and that nothing [N, V] is kept between forward and backward or made in backward.
import { describe, expect, it } from 'vitest';
import {
  crossEntropy,
  Generator,
  gpuCounters,
  memoryStats,
  noGrad,
  resetPeakMemory,
  setDefaultDevice,
  ShapeError,
  synchronize,
  tensor,
  type CrossEntropyOptions,
  type DType,
  type Tensor,
} from '../../src/index.js';
import { sizeClass } from '../../src/runtime/webgpu/buffer-pool.js';
import { expectClose, randomTensor, tolerance, type Tolerance } from '../helpers/compare.js';
import { setupWebGpu } from '../helpers/webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu');

type Device = 'cpu' | 'webgpu';
type Reduction = NonNullable<CrossEntropyOptions['reduction']>;

/** Targets in [0, classes) from a seeded generator, every `ignoreEvery`-th row (from row 1) set to `ignore`. */
function randomTargets(rows: number, classes: number, seed: number, ignore = -100, ignoreEvery = 4): number[] {
  const g = new Generator(seed);
  return Array.from({ length: rows }, (_, r) => (ignoreEvery > 0 && r % ignoreEvery === 1 ? ignore : g.nextU32() % classes));
}

interface Run {
  loss: Float32Array | Int32Array | Uint8Array;
  grad: Float32Array | Int32Array | Uint8Array;
  gradDtype: DType;
}

/**
 * crossEntropy(view(leaf), targets) and its backward on one device: the cotangent (a CPU tensor of the loss's
 * shape) for 'none', 1 otherwise. The leaf is a copy of `logits` on that device.
 */
async function run(
  device: Device,
  logits: Tensor,
  targets: number[],
  targetShape: number[],
  options: CrossEntropyOptions,
  view: (t: Tensor) => Tensor = (t) => t,
  cotangent?: Tensor,
): Promise<Run> {
  const leaf = (device === 'cpu' ? logits.clone() : await logits.to('webgpu')).requiresGrad_();
  const t = tensor(targets, { dtype: 'int32', shape: targetShape, device });
  const cot = cotangent && (await cotangent.to(device)).to(logits.dtype);
  const loss = crossEntropy(view(leaf), t, options);
  try {
    expect(loss.dtype).toBe(logits.dtype);
    loss.backward(cot);
    return { loss: await loss.toArray(), grad: await leaf.grad!.toArray(), gradDtype: leaf.grad!.dtype };
  } finally {
    loss.dispose();
    t.dispose();
    cot?.dispose();
    leaf.zeroGrad();
    leaf.dispose();
  }
}

/** Loss and gradient tolerances by logits dtype (f32: sums of up to 4099 exps in f32 against f64). */
function tolerances(dtype: DType): { loss: Tolerance; grad: Tolerance } {
  if (dtype === 'float32') return { loss: tolerance('float32', 'accumulate'), grad: { atol: 1e-9, rtol: 1e-4 } };
  // One ulp of the narrow dtype (a rounding boundary crossed); atol covers subnormal float16 gradients.
  if (dtype === 'float16') return { loss: tolerance('float16', 'accumulate'), grad: { atol: 1e-7, rtol: 2e-3 } };
  return { loss: tolerance('bfloat16', 'accumulate'), grad: { atol: 1e-7, rtol: 8e-3 } };
}

async function compareDevices(
  label: string,
  logits: Tensor,
  targets: number[],
  targetShape: number[],
  options: CrossEntropyOptions,
  view?: (t: Tensor) => Tensor,
): Promise<Run> {
  const reduction = options.reduction ?? 'mean';
  const cot = reduction === 'none' ? randomTensor(targetShape, 'float32') : undefined;
  const want = await run('cpu', logits, targets, targetShape, options, view, cot);
  const got = await run('webgpu', logits, targets, targetShape, options, view, cot);
  cot?.dispose();
  const tol = tolerances(logits.dtype);
  expectClose(got.loss, want.loss, tol.loss, `${label}: loss`);
  expect(got.gradDtype, `${label}: grad dtype`).toBe(logits.dtype);
  expectClose(got.grad, want.grad, tol.grad, `${label}: d logits`);
  return want;
}

describe.skipIf(!gpu.available)(`crossEntropy fused: WebGPU equals the CPU ${gpu.skipReason}`, () => {
  it('float32: rows shorter, longer and far longer than a workgroup (V = 5, 64, 1000, 4099), odd N, every reduction', async () => {
    const shapes: [number, number][] = [
      [13, 5],
      [3, 64],
      [37, 1000],
      [7, 4099],
      [1, 257],
    ];
    for (const [n, v] of shapes) {
      for (const reduction of ['mean', 'sum', 'none'] as const) {
        const logits = randomTensor([n, v], 'float32', 'normal', 3);
        await compareDevices(`[${n}, ${v}] ${reduction}`, logits, randomTargets(n, v, n * v), [n], { reduction });
        logits.dispose();
      }
    }
  });

  it('bfloat16 and float16 logits: loss and gradient in the logits dtype', async () => {
    for (const dtype of ['bfloat16', 'float16'] as const) {
      for (const [n, v] of [
        [11, 1000],
        [5, 4099],
        [9, 3],
      ] as [number, number][]) {
        for (const reduction of ['mean', 'none'] as Reduction[]) {
          const logits = randomTensor([n, v], dtype, 'normal', 3);
          await compareDevices(`${dtype} [${n}, ${v}] ${reduction}`, logits, randomTargets(n, v, 7 * n + v), [n], { reduction });
          logits.dispose();
        }
      }
    }
  });

  it('3-D logits, strided logits (a narrowed and a transposed view), an ignoreIndex inside [0, V)', async () => {
    const l3 = randomTensor([2, 3, 257], 'float32', 'normal', 2);
    await compareDevices('[2, 3, 257] none', l3, randomTargets(6, 257, 1), [2, 3], { reduction: 'none' });
    await compareDevices('[2, 3, 257] mean', l3, randomTargets(6, 257, 2), [2, 3], {});
    l3.dispose();
    const wide = randomTensor([9, 1030], 'float32', 'normal', 2);
    await compareDevices('narrowed [9, 1000] of [9, 1030]', wide, randomTargets(9, 1000, 3), [9], { reduction: 'sum' }, (t) => t.narrow(1, 17, 1000));
    wide.dispose();
    const tall = randomTensor([300, 6], 'bfloat16', 'normal', 2);
    await compareDevices('transposed [6, 300] bf16', tall, randomTargets(6, 300, 4), [6], { reduction: 'none' }, (t) => t.transpose(0, 1));
    tall.dispose();
    const logits = randomTensor([10, 7], 'float32', 'normal', 2);
    const targets = randomTargets(10, 7, 5, 3, 3);
    expect(targets.filter((t) => t === 3).length).toBeGreaterThan(2);
    const want = await compareDevices('ignoreIndex 3', logits, targets, [10], { ignoreIndex: 3, reduction: 'none' });
    targets.forEach((t, r) => t === 3 && expect(want.loss[r], `ignored row ${r}`).toBe(0));
    logits.dispose();
  });

  it('all rows ignored: mean is NaN (PyTorch), sum 0, gradients 0', async () => {
    const logits = randomTensor([5, 300], 'float32', 'normal', 2);
    const ignored = [-100, -100, -100, -100, -100];
    const mean = await compareDevices('all ignored, mean', logits, ignored, [5], {});
    expect(Number.isNaN(mean.loss[0])).toBe(true);
    expect(Array.from(mean.grad).every((g) => g === 0)).toBe(true);
    const sum = await compareDevices('all ignored, sum', logits, ignored, [5], { reduction: 'sum' });
    expect(sum.loss[0]).toBe(0);
    logits.dispose();
  });

  it('a NaN logit makes its row NaN (loss and gradient); -Inf logits off the target are fine; -Inf at the target gives +Inf', async () => {
    const [n, v] = [6, 1000];
    const values = Array.from(await randomTensor([n, v], 'float32', 'normal', 2).toArray());
    const targets = [4, 10, 999, 0, 7, -100];
    values[0 * v + 500] = NaN; // row 0: NaN off the target
    for (let j = 0; j < v; j += 3) if (j !== 10) values[1 * v + j] = -Infinity; // row 1: many -Inf, target finite
    values[2 * v + 999] = -Infinity; // row 2: -Inf at the target
    values[5 * v + 1] = NaN; // row 5: NaN in an ignored row
    const logits = tensor(values, { shape: [n, v] });
    const want = await compareDevices('special values', logits, targets, [n], { reduction: 'none' });
    expect(Number.isNaN(want.loss[0])).toBe(true);
    expect(Number.isFinite(want.loss[1])).toBe(true);
    expect(want.loss[2]).toBe(Infinity);
    expect(want.loss[5]).toBe(0);
    expect(Array.from(want.grad.slice(0, v)).every(Number.isNaN)).toBe(true);
    expect(Array.from(want.grad.slice(v, 2 * v)).every(Number.isFinite)).toBe(true);
    expect(Math.abs(want.grad[v + 3])).toBe(0); // d/d(-Inf logit) = 0 (signed by the cotangent)
    const mean = await compareDevices('special values, mean', logits, targets, [n], {});
    expect(Number.isNaN(mean.loss[0])).toBe(true);
    logits.dispose();
  });

  it('a target outside [0, V): the CPU throws naming the row, WebGPU raises an IndexError at the next read back', async () => {
    const logits = randomTensor([4, 70], 'float32');
    const targets = [3, 69, 70, 1];
    expect(() => crossEntropy(logits, tensor(targets, { dtype: 'int32' }))).toThrow(ShapeError);
    expect(() => crossEntropy(logits, tensor(targets, { dtype: 'int32' }))).toThrow(/target 70 of row 2 is out of range for 70 classes/);
    expect(() => crossEntropy(logits, tensor([-1, 0, 0, 0], { dtype: 'int32' }))).toThrow(/row 0/);
    const g = await logits.to('webgpu');
    const loss = crossEntropy(g, tensor(targets, { dtype: 'int32', device: 'webgpu' }), { reduction: 'none' });
    await expect(loss.toArray()).rejects.toThrow(/crossEntropy: target 70 is out of range for 70 classes/);
    loss.dispose();
    // The flag is cleared once raised: the next (valid) call reads back normally.
    const ok = crossEntropy(g, tensor([3, 69, 0, 1], { dtype: 'int32', device: 'webgpu' }), { reduction: 'none' });
    expect(Array.from(await ok.toArray()).every(Number.isFinite)).toBe(true);
    ok.dispose();
    g.dispose();
  });

  it('keeps nothing [N, V] between forward and backward, and backward makes nothing [N, V] beyond the gradient', async () => {
    const [n, v] = [64, 4099];
    const nv = sizeClass(n * v * 4);
    for (const reduction of ['mean', 'sum', 'none'] as const) {
      const x = (await randomTensor([n, v], 'float32', 'normal', 2).to('webgpu')).requiresGrad_();
      const t = tensor(randomTargets(n, v, 11), { dtype: 'int32', device: 'webgpu' });
      await synchronize();
      const before = memoryStats().liveBytes;
      const perRow = reduction === 'none' ? crossEntropy(x, t, { reduction }) : undefined;
      const loss = perRow ? perRow.sum() : crossEntropy(x, t, { reduction });
      await synchronize();
      const kept = memoryStats().liveBytes - before;
      // lse [N], the loss, the count: a few 256-byte size classes, against 1 MiB for one [N, V] float32.
      expect(kept, `${reduction}: bytes kept for backward`).toBeLessThanOrEqual(8 * sizeClass(n * 4));
      resetPeakMemory();
      const atBackward = memoryStats().liveBytes;
      loss.backward();
      await synchronize();
      expect(memoryStats().peakLiveBytes - atBackward, `${reduction}: peak growth in backward`).toBeLessThanOrEqual(nv + 8 * sizeClass(n * 4));
      loss.dispose();
      perRow?.dispose();
      expect(memoryStats().liveBytes - before, `${reduction}: the gradient is all that stays`).toBe(nv);
      x.zeroGrad();
      x.dispose();
      t.dispose();
    }
  });

  it('one kernel over the logits each way: no softmax, no [N, V] elementwise pass', async () => {
    const x = (await randomTensor([9, 1000], 'float32').to('webgpu')).requiresGrad_();
    const t = tensor(randomTargets(9, 1000, 12), { dtype: 'int32', device: 'webgpu' });
    for (let k = 0; k < 2; k++) {
      // The second round is measured (pipelines compiled by the first).
      await synchronize();
      const c0 = gpuCounters();
      const loss = crossEntropy(x, t, { reduction: 'sum' });
      const c1 = gpuCounters();
      loss.backward();
      const c2 = gpuCounters();
      if (k === 1) {
        const fwd = (name: string) => (c1.byKernel[name] ?? 0) - (c0.byKernel[name] ?? 0);
        const bwd = (name: string) => (c2.byKernel[name] ?? 0) - (c1.byKernel[name] ?? 0);
        expect(fwd('cross_entropy')).toBe(1);
        expect(c1.dispatches - c0.dispatches, 'forward: the kernel and the sum').toBe(2);
        expect(fwd('softmax') + fwd('softmax-rows') + fwd('softmax-split')).toBe(0);
        expect(bwd('cross_entropy_grad')).toBe(1);
        // The seed's fill and the gradient kernel.
        expect(c2.dispatches - c1.dispatches, 'backward').toBe(2);
      }
      loss.dispose();
      x.zeroGrad();
    }
    x.dispose();
    t.dispose();
  });
});

describe('crossEntropy fused on the CPU', () => {
  /** d/dx of sum(crossEntropy(x) * r) against central differences in float64 on the host. */
  async function gradcheck(
    label: string,
    shape: number[],
    targets: Tensor,
    options: CrossEntropyOptions,
    view: (t: Tensor) => Tensor = (t) => t,
  ): Promise<void> {
    const x0 = randomTensor(shape, 'float32', 'normal', 2);
    const y0 = noGrad(() => crossEntropy(view(x0), targets, options));
    const r = y0.numel > 1 ? randomTensor(y0.shape, 'float32') : undefined;
    y0.dispose();
    const f = (x: Tensor) => {
      const y = crossEntropy(view(x), targets, options);
      return r ? y.mul(r).sum() : y;
    };
    const leaf = x0.detach().requiresGrad_();
    f(leaf).backward();
    const base = Array.from(await x0.toArray());
    const eps = 1e-2;
    const numeric = new Float64Array(base.length);
    for (let i = 0; i < base.length; i++) {
      const at = async (delta: number) => {
        const v = base.slice();
        v[i] += delta;
        const y = noGrad(() => f(tensor(v, { shape })));
        const out = await y.item();
        y.dispose();
        return out;
      };
      numeric[i] = ((await at(eps)) - (await at(-eps))) / (2 * eps);
    }
    expectClose(await leaf.grad!.toArray(), numeric, { atol: 2e-3, rtol: 1e-2 }, label);
    leaf.zeroGrad();
    x0.dispose();
    r?.dispose();
  }

  it('the gradient equals central differences: every reduction, ignored rows, 3-D and strided logits', async () => {
    const targets = tensor([1, -100, 6, 0, 3], { dtype: 'int32' });
    await gradcheck('mean', [5, 7], targets, {});
    await gradcheck('sum', [5, 7], targets, { reduction: 'sum' });
    await gradcheck('none', [5, 7], targets, { reduction: 'none' });
    await gradcheck('ignoreIndex 0', [5, 7], tensor([1, 0, 6, 0, 3], { dtype: 'int32' }), { ignoreIndex: 0 });
    await gradcheck(
      '3-D none',
      [2, 3, 4],
      tensor(
        [
          [0, 3, -100],
          [2, 2, 1],
        ],
        { dtype: 'int32' },
      ),
      { reduction: 'none' },
    );
    await gradcheck('transposed view', [7, 5], targets, {}, (t) => t.transpose(0, 1));
  });

  it('the loss is -log_softmax at the target, reduced; rejects bad dtypes and shapes', async () => {
    const logits = randomTensor([4, 9], 'float32', 'normal', 3);
    const targets = [8, -100, 0, 5];
    const lsm = await logits.logSoftmax(-1).toArray();
    const per = targets.map((t, r) => (t === -100 ? 0 : -lsm[r * 9 + t]));
    const t = tensor(targets, { dtype: 'int32' });
    expectClose(await crossEntropy(logits, t, { reduction: 'none' }).toArray(), per, tolerance('float32', 'transcendental'), 'none');
    expectClose([await crossEntropy(logits, t, { reduction: 'sum' }).item()], [per[0] + per[2] + per[3]], tolerance('float32', 'transcendental'), 'sum');
    expectClose([await crossEntropy(logits, t).item()], [(per[0] + per[2] + per[3]) / 3], tolerance('float32', 'transcendental'), 'mean');
    expect(() => crossEntropy(logits, tensor(targets))).toThrow(/targets must be int32/);
    expect(() => crossEntropy(tensor([[1, 2]], { dtype: 'int32' }), tensor([0], { dtype: 'int32' }))).toThrow(/logits must be floating/);
    expect(() => crossEntropy(logits, tensor([0, 1, 2], { dtype: 'int32' }))).toThrow(ShapeError);
  });
});
