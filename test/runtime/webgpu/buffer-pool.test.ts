// GPU memory accounting through the public API (memoryStats): live bytes return to where they started once every
// tensor (and view) is disposed, views keep storage alive after their base is disposed, temporaries of ops are
// released, peak >= live, and the pool reuses buffers instead of creating new ones. Plus sizeClass on its own.
import { describe, expect, it } from 'vitest';
import * as tg from '../../../src/index.js';
import { sizeClass } from '../../../src/runtime/webgpu/buffer-pool.js';
import { setupWebGpu } from '../../helpers/webgpu.js';

const gpu = await setupWebGpu();

describe('sizeClass', () => {
  it('rounds to 256 B up to 64 KiB, then to 8 steps per power of two (<= 12.5% slack), never below 4', () => {
    expect(sizeClass(0)).toBe(256);
    expect(sizeClass(1)).toBe(256);
    expect(sizeClass(256)).toBe(256);
    expect(sizeClass(257)).toBe(512);
    expect(sizeClass(65536)).toBe(65536);
    expect(sizeClass(65537)).toBe(65536 + 8192);
    expect(sizeClass(1 << 20)).toBe(1 << 20);
    expect(sizeClass((1 << 20) + 1)).toBe((1 << 20) + (1 << 17));
    for (const b of [1000, 70000, 123457, 5e6, 3e8]) {
      const c = sizeClass(b);
      expect(c).toBeGreaterThanOrEqual(b);
      expect(c / b).toBeLessThanOrEqual(b > 65536 ? 1.125 : 1 + 256 / b);
      expect(c % 4).toBe(0);
    }
  });
});

describe.skipIf(!gpu.available)(`WebGPU memory accounting ${gpu.skipReason}`, () => {
  const live = () => tg.memoryStats().liveBytes;

  it('live bytes return to the start after disposing tensors, results and views', async () => {
    await tg.synchronize();
    const start = tg.memoryStats();
    const a = tg.randn([64, 64], { device: 'webgpu' });
    const b = tg.ones([64, 64], { device: 'webgpu', dtype: 'float16' });
    expect(live()).toBeGreaterThanOrEqual(start.liveBytes + 64 * 64 * 4 + 64 * 64 * 2);
    const m = a.matmul(a);
    const s = m.add(b);
    const e = s.exp();
    const c = e.sum(0);
    const views = [a.T, a.narrow(0, 1, 3), b.reshape(4096), b.select(0, 2)];
    expect((await c.toArray()).length).toBe(64);
    for (const t of [a, b, m, s, e, c, ...views]) t.dispose();
    expect(live()).toBe(start.liveBytes);
    expect(tg.memoryStats().liveBuffers).toBe(start.liveBuffers);
  });

  it('disposing a base keeps its storage alive while a view exists', async () => {
    const start = live();
    const base = tg.arange(1000, undefined, 1, { device: 'webgpu', dtype: 'float32' });
    const afterAlloc = live();
    expect(afterAlloc).toBeGreaterThan(start);
    const view = base.narrow(0, 10, 5);
    const view2 = view.reshape(5, 1);
    base.dispose();
    expect(live()).toBe(afterAlloc);
    expect(Array.from(await view.toArray())).toEqual([10, 11, 12, 13, 14]);
    view.dispose();
    expect(live()).toBe(afterAlloc);
    expect(Array.from(await view2.toArray())).toEqual([10, 11, 12, 13, 14]);
    view2.dispose();
    expect(live()).toBe(start);
    view2.dispose(); // idempotent: no double free
    expect(live()).toBe(start);
  });

  it('temporaries of ops are released: scalar operands, strided reads/reductions, f16 matmul, reshape copies, cat', async () => {
    const x = tg.randn([33, 65], { device: 'webgpu', dtype: 'float16' });
    const start = live();
    const results = [
      x.add(1.5), // a 0-d scalar tensor is made and disposed
      tg.sub(2, x),
      x.T.sum(0), // a strided reduction compacts first
      x.T.max(), // all-elements: reshape of a transpose copies
      x.matmul(x.T), // f16 matmul accumulates in an f32 temporary
      x.T.reshape(-1),
      tg.cat([x, x.narrow(0, 1, 3)]),
      x.narrow(1, 1, 7).contiguous(),
      x.mean(1, { keepdim: true }),
    ];
    for (const r of results) await r.toArray();
    await x.narrow(1, 1, 5).toArray(); // a mid-word read compacts into a temporary
    for (const r of results) r.dispose();
    expect(live()).toBe(start);
    x.dispose();
  });

  it('peak live bytes >= live bytes and cover the largest moment; resetPeakMemory lowers the peak to live', async () => {
    tg.resetPeakMemory();
    const s0 = tg.memoryStats();
    expect(s0.peakLiveBytes).toBe(s0.liveBytes);
    const big = tg.zeros([1 << 18], { device: 'webgpu' });
    const atBig = live();
    big.dispose();
    const s1 = tg.memoryStats();
    expect(s1.peakLiveBytes).toBeGreaterThanOrEqual(atBig);
    expect(s1.peakLiveBytes).toBeGreaterThanOrEqual(s1.liveBytes);
    expect(s1.allocatedBytes).toBeGreaterThanOrEqual(s1.liveBytes);
    expect(s1.peakAllocatedBytes).toBeGreaterThanOrEqual(s1.allocatedBytes);
    tg.resetPeakMemory();
    expect(tg.memoryStats().peakLiveBytes).toBe(tg.memoryStats().liveBytes);
  });

  it('the pool reuses buffers: a loop of alloc/dispose of one size creates no new buffers', async () => {
    const step = async () => {
      const t = tg.zeros([3000], { device: 'webgpu' });
      const u = t.add(1); // also a 0-d scalar temporary
      expect((await u.toArray())[0]).toBe(1);
      t.dispose();
      u.dispose();
    };
    // Released buffers become reusable after the next submit, so steady state holds two iterations' worth.
    for (let i = 0; i < 3; i++) await step();
    await tg.synchronize();
    const created = tg.memoryStats().createdBuffers;
    for (let i = 0; i < 50; i++) await step();
    expect(tg.memoryStats().createdBuffers).toBe(created);
    expect(tg.memoryStats().pooledBytes).toBeGreaterThan(0);
  });

  it('emptyCache frees pooled buffers without touching live ones', async () => {
    const keep = tg.ones([100], { device: 'webgpu' });
    tg.zeros([5000], { device: 'webgpu' }).dispose();
    await tg.synchronize();
    const before = tg.memoryStats();
    tg.emptyCache();
    const after = tg.memoryStats();
    expect(after.pooledBytes).toBe(0);
    expect(after.liveBytes).toBe(before.liveBytes);
    expect(after.allocatedBytes).toBe(after.liveBytes);
    expect(Array.from(await keep.toArray()).every((v) => v === 1)).toBe(true);
    keep.dispose();
  });

  it('counters: work is batched (many dispatches, one submit per read) and pipelines are cached', async () => {
    const x = tg.randn([257], { device: 'webgpu' });
    await x.toArray();
    const c0 = tg.gpuCounters();
    let y = x;
    for (let i = 0; i < 20; i++) y = y.mul(1.0001);
    await y.toArray();
    const c1 = tg.gpuCounters();
    expect(c1.dispatches - c0.dispatches).toBeGreaterThanOrEqual(20);
    expect(c1.submits - c0.submits).toBe(1);
    expect(c1.reads - c0.reads).toBe(1);
    expect(c1.pipelinesCompiled - c0.pipelinesCompiled).toBeLessThanOrEqual(2);
  });
});

describe('memoryStats without a WebGPU device', () => {
  it('reads as all zeros on the CPU (no throw)', () => {
    if (gpu.available) return; // covered by the suites above
    expect(tg.memoryStats()).toEqual({
      liveBytes: 0,
      peakLiveBytes: 0,
      pooledBytes: 0,
      allocatedBytes: 0,
      peakAllocatedBytes: 0,
      liveBuffers: 0,
      createdBuffers: 0,
    });
  });
});
