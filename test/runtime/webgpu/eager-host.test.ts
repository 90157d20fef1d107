// The host work of one eager op at steady state (issue 35), counted rather than timed: one output buffer, one
// dispatch, no WGSL built, no pipeline compiled and no new bind group once the buffers repeat, one uniform block per
// kernel refilled (not allocated) per dispatch, and the result sharing its input's shape. A change that brings back per-op
// work of these kinds fails here on any machine; bench/dispatch-overhead.bench.ts gives the times.
import { afterEach, describe, expect, it } from 'vitest';
import { add, noGrad, randn, synchronize, type Tensor } from '../../../src/index.js';
import { webgpuBackend } from '../../../src/runtime/registry.js';
import type { GpuBuffer } from '../../../src/runtime/webgpu/gpu-context.js';
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
