// What a kernel launcher needs from the WebGPU backend: buffers, cached pipelines and batched dispatches.

/** A tensor's storage on the GPU: a pooled buffer of `size` bytes (a multiple of 4; words of packed elements). */
export interface GpuBuffer {
  readonly buffer: GPUBuffer;
  readonly size: number;
}

export interface GpuContext {
  readonly gpuDevice: GPUDevice;
  /** A storage buffer of at least `bytes` bytes (rounded up to whole words; contents undefined). */
  alloc(bytes: number): GpuBuffer;
  release(buffer: GpuBuffer): void;
  /** The pipeline for `key` (entry point `entryPoint`, default 'main'), compiling `build()`'s WGSL on first use. */
  pipeline(key: string, build: () => string, entryPoint?: string): GPUComputePipeline;
  /**
   * Queues one dispatch: binding 0 is the uniform block `params` (omitted when null), then `buffers` in order.
   * Work is batched into one command buffer until something is read back. `bytes`: what it reads and writes, where
   * known (for the profiler's GB/s). `params`, `buffers` and `grid` are read during the call only: a launcher
   * refills the same ones for its next dispatch (kernel.ts), so whatever keeps them (a recorded step) copies them.
   */
  dispatch(
    pipeline: GPUComputePipeline,
    params: ArrayBuffer | null,
    buffers: readonly GpuBuffer[],
    grid: readonly [number, number, number],
    bytes?: number,
  ): void;
  /**
   * Whether kernels may reduce with subgroup operations in groups of `groupSize` consecutive invocations: the
   * device has the 'subgroups' feature, every subgroup size divides groupSize, and subgroups were checked to hold
   * consecutive invocations.
   */
  subgroupReduce(groupSize: number): boolean;
  /**
   * The width w (at most `limit`; 0 when subgroups are off) such that every aligned group of w consecutive
   * invocations (by local_invocation_index of a 1-D workgroup) lies inside one subgroup, so its lanes can exchange
   * values with subgroupShuffle: min(limit, the device's smallest subgroup size).
   */
  subgroupShareWidth(limit: number): number;
  /**
   * The device-side error flag (kernels/device-error.ts) for a kernel's `err` binding: kernels that read indices
   * report an out-of-range one there, and the next read back or synchronize() raises it.
   */
  deviceErrorFlag(): GpuBuffer;
  /** Limits the kernels must respect. */
  readonly limits: { maxStorageBufferBindingSize: number; maxComputeWorkgroupsPerDimension: number };
}

/** Bytes of storage for n elements packed `lanes` to a word (never 0: WebGPU bindings need a size). */
export function wordBytes(n: number, lanes: number): number {
  return Math.max(4, Math.ceil(n / lanes) * 4);
}
