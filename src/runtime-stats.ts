// Memory and work accounting of the WebGPU device, for users, benchmarks and tests.
import { webgpuBackend } from './backends/registry.js';
import type { MemoryStats } from './backends/webgpu/buffer-pool.js';
import type { GpuCounters } from './backends/webgpu/webgpu-backend.js';

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
  return c ? { ...c, byKernel: { ...c.byKernel } } : { dispatches: 0, submits: 0, reads: 0, pipelinesCompiled: 0, byKernel: {} };
}
