// The host work of one eager op at steady state (issue 35), counted rather than timed: one output buffer, one
// dispatch, no WGSL built, no pipeline compiled and no new bind group once the buffers repeat, one uniform block per
// kernel refilled (not allocated) per dispatch, and the result sharing its input's shape. A change that brings back per-op
// work of these kinds fails here on any machine; bench/dispatch-overhead.bench.ts gives the times.
import { afterEach, describe, expect, it } from 'vitest';
import { add, mul, noGrad, randn, sub, synchronize, tensor, type Tensor } from '../../../src/index.js';
import { webgpuBackend } from '../../../src/runtime/registry.js';
import type { GpuBuffer } from '../../../src/runtime/webgpu/gpu-context.js';
import { BITS, expectClose, randomTensor } from '../../helpers/compare.js';
import { setupWebGpu } from '../../helpers/webgpu.js';

const gpu = await setupWebGpu();

/** An element count no other test of this file uses, so the pool's buffers of its size class are this test's alone. */
const N = 12_347;

interface Counts {
  ops: number;
  allocs: number;
  dispatches: number;
  /** WGSL modules built (a pipeline lookup's build callback run). */
  wgslBuilt: number;
  bindGroupsMade: number;
  /** Distinct uniform blocks and buffer lists handed to dispatch(), by identity. */
  paramBlocks: Set<ArrayBuffer | null>;
  bufferLists: Set<readonly GpuBuffer[]>;
  uniformBytes: number;
}

const restore: (() => void)[] = [];
afterEach(() => {
  while (restore.length) restore.pop()!();
});

/** Wraps the backend's and device's entry points with counters for the duration of one test. */
function instrument(): Counts {
  const backend = webgpuBackend()!;
  const counts: Counts = {
    ops: 0,
    allocs: 0,
    dispatches: 0,
    wgslBuilt: 0,
    bindGroupsMade: 0,
    paramBlocks: new Set(),
    bufferLists: new Set(),
    uniformBytes: 0,
  };
  const target = backend as unknown as Record<string, (...args: unknown[]) => unknown>;
  const wrap = <T extends object>(obj: T, name: string, count: (...args: unknown[]) => void) => {
    const o = obj as unknown as Record<string, (...args: unknown[]) => unknown>;
    const own = Object.hasOwn(o, name);
    const original = o[name];
    o[name] = function (this: unknown, ...args: unknown[]) {
      count(...args);
      return original.apply(this, args);
    };
    restore.push(() => {
      if (own) o[name] = original;
      else delete o[name];
    });
  };
  wrap(target, 'alloc', () => counts.allocs++);
  const pipeline = target.pipeline;
  target.pipeline = function (this: unknown, key: unknown, build: unknown, entry: unknown) {
    return pipeline.call(this, key, () => (counts.wgslBuilt++, (build as () => string)()), entry);
  };
  restore.push(() => delete target.pipeline);
  wrap(target, 'dispatch', (_pipeline, params, buffers) => {
    counts.dispatches++;
    counts.paramBlocks.add(params as ArrayBuffer | null);
    counts.bufferLists.add(buffers as readonly GpuBuffer[]);
    counts.uniformBytes += (params as ArrayBuffer | null)?.byteLength ?? 0;
  });
  wrap(backend.gpuDevice, 'createBindGroup', () => counts.bindGroupsMade++);
  return counts;
}

/** Runs `op` `times` times, disposing each result and submitting after each, so one or two pooled buffers cycle. */
async function steady(op: () => Tensor, times: number): Promise<void> {
  for (let i = 0; i < times; i++) {
    op().dispose();
    await synchronize();
  }
}

describe.skipIf(!gpu.available)(`eager host work per op ${gpu.skipReason}`, () => {
  it('add(t, y), add(t, 1) and a unary op: one buffer, one dispatch, no new pipeline or bind group, reused uniform blocks', async () => {
    const x = randn([N], { device: 'webgpu' });
    const y = randn([N], { device: 'webgpu' });
    try {
      const ops: [string, () => Tensor][] = [
        ['add(x, y)', () => add(x, y)],
        ['x.add(1)', () => x.add(1)],
        ['x.exp()', () => x.exp()],
        ['x.mul(y) under noGrad', () => noGrad(() => x.mul(y))],
      ];
      for (const [name, op] of ops) {
        await steady(op, 8); // compiles the pipeline and caches the bind group of every buffer the pool cycles
        const counts = instrument();
        const OPS = 16;
        for (let i = 0; i < OPS; i++) {
          op().dispose();
          await synchronize();
        }
        restore.splice(0).forEach((r) => r());
        expect({ name, allocs: counts.allocs, dispatches: counts.dispatches }).toEqual({ name, allocs: OPS, dispatches: OPS });
        expect({ name, wgslBuilt: counts.wgslBuilt, bindGroupsMade: counts.bindGroupsMade }).toEqual({ name, wgslBuilt: 0, bindGroupsMade: 0 });
        // One uniform block and one buffer list per kernel, refilled for each dispatch.
        expect({ name, blocks: counts.paramBlocks.size, lists: counts.bufferLists.size }).toEqual({ name, blocks: 1, lists: 1 });
        // The elementwise map's uniform block is a few words (sizes, offsets, a number operand), never a page.
        expect(counts.uniformBytes / OPS).toBeLessThanOrEqual(256);
      }
    } finally {
      x.dispose();
      y.dispose();
    }
  });

  it('refilled launch objects and per-shape caches serve no stale entry: ops, dtypes, shapes, offsets, strides and broadcasts alternating back to back', async () => {
    // The elementwise launcher refills one variant/params/buffers object per kernel each dispatch, results share a
    // layout per shape array, and a broadcast view is kept per (layout, shape): queue every case in three orders
    // before reading anything, so each dispatch follows a different one, and compare with the CPU bit for bit.
    const cpu: Record<string, Tensor> = {
      a: randomTensor([4, 64]),
      b: randomTensor([4, 64]),
      bias: randomTensor([64]),
      col: randomTensor([4, 1]),
      a2: randomTensor([2, 64]),
      c3: randomTensor([3, 4, 64]),
      sq: randomTensor([16, 16]),
      i: randomTensor([4, 64], 'int32', 'coarse'),
      j: randomTensor([64], 'int32', 'coarse'),
      h: randomTensor([4, 64], 'float16'),
      one: tensor([0.75], { device: 'cpu' }),
    };
    const cases: [string, (t: Record<string, Tensor>) => Tensor][] = [
      ['add(a, b)', (t) => add(t.a, t.b)],
      ['mul(a, bias)', (t) => mul(t.a, t.bias)],
      ['sub(bias, a)', (t) => sub(t.bias, t.a)],
      ['add(a2, bias)', (t) => add(t.a2, t.bias)],
      ['add(c3, bias)', (t) => add(t.c3, t.bias)],
      ['mul(c3, a)', (t) => mul(t.c3, t.a)],
      ['add(a, col)', (t) => add(t.a, t.col)],
      ['add(a, one)', (t) => add(t.a, t.one)],
      ['narrow offsets 1 and 3', (t) => add(t.a.narrow(1, 1, 60), t.b.narrow(1, 3, 60))],
      ['narrow offsets 4 and 0', (t) => sub(t.a.narrow(1, 4, 60), t.b.narrow(1, 0, 60))],
      ['add(sq.T, sq)', (t) => add(t.sq.T, t.sq)],
      ['reshaped [2, 128]', (t) => mul(t.a.reshape([2, 128]), t.b.reshape([2, 128]))],
      ['flat [256]', (t) => add(t.a.reshape([256]), t.b.reshape([256]))],
      ['int32 add(i, j)', (t) => add(t.i, t.j)],
      ['int32 i * 3', (t) => t.i.mul(3)],
      ['a + 1.5', (t) => t.a.add(1.5)],
      ['2 - a', (t) => sub(2, t.a)],
      ['float16 h + h', (t) => add(t.h, t.h)],
      ['float16 h * a', (t) => mul(t.h, t.a)],
      ['neg(a)', (t) => t.a.neg()],
      ['neg(i)', (t) => t.i.neg()],
      ['relu(sq.T)', (t) => t.sq.T.relu()],
      ['abs(h)', (t) => t.h.abs()],
      ['a > b', (t) => t.a.gt(t.b)],
    ];
    const gpuInputs: Record<string, Tensor> = {};
    for (const [k, v] of Object.entries(cpu)) gpuInputs[k] = await v.to('webgpu');
    const orders = [cases, [...cases].reverse(), cases.filter((_, i) => i % 2 === 0).concat(cases.filter((_, i) => i % 2 === 1))];
    try {
      for (const order of orders) {
        const results = order.map(([name, f]) => [name, f(gpuInputs)] as const);
        for (const [name, r] of results) {
          const want = cases.find(([n]) => n === name)![1](cpu);
          try {
            expect(r.shape, name).toEqual(want.shape);
            expect(r.dtype, name).toBe(want.dtype);
            expectClose(await r.toArray(), await want.toArray(), BITS, name);
          } finally {
            r.dispose();
            want.dispose();
          }
        }
      }
    } finally {
      for (const t of [...Object.values(cpu), ...Object.values(gpuInputs)]) t.dispose();
    }
  });

  it('a result shares its input shape (no copy) and carries no graph without grad', () => {
    const x = randn([4, 8], { device: 'webgpu' });
    const y = randn([4, 8], { device: 'webgpu' });
    const r = add(x, y);
    const s = r.exp();
    try {
      expect(r.shape).toBe(x.shape);
      expect(s.shape).toBe(x.shape);
      expect(Object.isFrozen(r.shape) && Object.isFrozen(r.strides)).toBe(true);
      expect(r.layout).toBe(r.layout);
      expect(r.gradFn).toBeUndefined();
      expect(r.requiresGrad).toBe(false);
    } finally {
      for (const t of [x, y, r, s]) t.dispose();
    }
  });
});
