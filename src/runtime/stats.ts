// Memory and work accounting of the WebGPU device, for users, benchmarks and tests.
import { webgpuBackend } from './registry.js';
import type { MemoryStats } from './webgpu/buffer-pool.js';
import type { KernelTime } from './webgpu/profiler.js';
import type { GpuCounters } from './webgpu/webgpu-backend.js';
import { DeviceUnavailableError } from '../core/errors.js';

const NO_GPU: MemoryStats = { liveBytes: 0, peakLiveBytes: 0, pooledBytes: 0, allocatedBytes: 0, peakAllocatedBytes: 0, liveBuffers: 0, createdBuffers: 0 };

/** GPU bytes: live (tensors + temporaries), peak live, pooled for reuse, total held (torch.mps.*_memory). */
export function memoryStats(): MemoryStats {
  return webgpuBackend()?.memoryStats() ?? { ...NO_GPU };
}

export function resetPeakMemory(): void {
  webgpuBackend()?.resetPeakMemory();
}

/** Frees pooled idle GPU buffers. */
export function emptyCache(): void {
  webgpuBackend()?.emptyCache();
}

/** Waits for all queued GPU work to finish. */
export async function synchronize(): Promise<void> {
  await webgpuBackend()?.synchronize();
}

/** Dispatch/submit/read counts since the device started (copy: later work does not change it). */
export function gpuCounters(): GpuCounters {
  const c = webgpuBackend()?.counters;
  return c ? { ...c, byKernel: { ...c.byKernel } } : { dispatches: 0, submits: 0, reads: 0, pipelinesCompiled: 0, replays: 0, byKernel: {} };
}

/** GPU dispatches queued since the device started (a cheap counter read, for per-layer accounting). */
export function dispatchCount(): number {
  return webgpuBackend()?.counters.dispatches ?? 0;
}

/** Starts timing every GPU dispatch with timestamp queries (throws without 'timestamp-query' or WebGPU). */
export function startProfiling(): void {
  const b = webgpuBackend();
  if (!b) throw new DeviceUnavailableError('profiling needs the WebGPU device', "call initDevice('webgpu') first");
  b.startProfiling();
}

/** Drops the timings so far (after warm-up work); timing goes on. */
export async function resetProfile(): Promise<void> {
  await webgpuBackend()?.resetProfile();
}

/** Stops timing; GPU µs per kernel family since start (or the last reset), largest first. */
export async function stopProfiling(): Promise<KernelTime[]> {
  return (await webgpuBackend()?.stopProfiling()) ?? [];
}
