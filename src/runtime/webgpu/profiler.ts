// GPU time per kernel family from timestamp queries: while profiling, every dispatch runs in its own compute pass
// whose beginning and end are timestamped; each submit resolves its queries and reads them back asynchronously.
// One pass per dispatch costs some GPU time itself, so profile runs are for finding where time goes, not for
// tok/s figures.

export interface KernelTime {
  kernel: string;
  dispatches: number;
  /** Sum of (end - begin) over the kernel's passes, in µs. */
  totalMicros: number;
  /** Bytes its dispatches read and wrote, when every one of them said (launchers that know their traffic do). */
  bytes?: number;
}

interface Timed {
  kernel: string;
  bytes: number | undefined;
}

export class GpuProfiler {
  /** Dispatches one batch can time (two timestamps each). */
  readonly capacity: number;
  private readonly querySet: GPUQuerySet;
  private readonly resolveBuffer: GPUBuffer;
  private batch: Timed[] = [];
  private readonly totals = new Map<string, { dispatches: number; ns: number; bytes: number; unknownBytes: boolean }>();
  private readonly reads: Promise<void>[] = [];

  constructor(
    private readonly device: GPUDevice,
    capacity = 1024,
  ) {
    this.capacity = capacity;
    this.querySet = device.createQuerySet({ type: 'timestamp', count: 2 * capacity });
    this.resolveBuffer = device.createBuffer({ size: 16 * capacity, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
  }

  get full(): boolean {
    return this.batch.length >= this.capacity;
  }

  /** The descriptor of the pass for the next dispatch, which belongs to `kernel` and moves `bytes` (if known). */
  passFor(kernel: string, bytes?: number): GPUComputePassDescriptor {
    const i = this.batch.length;
    this.batch.push({ kernel, bytes });
    return { timestampWrites: { querySet: this.querySet, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 } };
  }

  /** Before the batch's encoder finishes: resolve its timestamps into a buffer to read after the submit. */
  resolve(encoder: GPUCommandEncoder): (() => void) | undefined {
    const kernels = this.batch;
    this.batch = [];
    if (kernels.length === 0) return undefined;
    const bytes = 16 * kernels.length;
    encoder.resolveQuerySet(this.querySet, 0, 2 * kernels.length, this.resolveBuffer, 0);
    const read = this.device.createBuffer({ size: bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    encoder.copyBufferToBuffer(this.resolveBuffer, 0, read, 0, bytes);
    // After the submit: map and add the durations up.
    return () => {
      this.reads.push(
        read.mapAsync(GPUMapMode.READ).then(
          () => {
            const t = new BigInt64Array(read.getMappedRange());
            kernels.forEach(({ kernel, bytes }, i) => {
              const entry = this.totals.get(kernel) ?? { dispatches: 0, ns: 0, bytes: 0, unknownBytes: false };
              entry.dispatches++;
              entry.ns += Math.max(0, Number(t[2 * i + 1] - t[2 * i]));
              if (bytes === undefined) entry.unknownBytes = true;
              else entry.bytes += bytes;
              this.totals.set(kernel, entry);
            });
            read.unmap();
            read.destroy();
          },
          () => read.destroy(),
        ),
      );
    };
  }

  /** Waits for every submitted batch's timestamps; totals by kernel family, largest first. */
  async results(): Promise<KernelTime[]> {
    await Promise.all(this.reads.splice(0));
    return [...this.totals.entries()]
      .map(([kernel, t]) => ({ kernel, dispatches: t.dispatches, totalMicros: t.ns / 1000, ...(t.unknownBytes ? {} : { bytes: t.bytes }) }))
      .sort((a, b) => b.totalMicros - a.totalMicros);
  }

  reset(): void {
    this.totals.clear();
  }

  destroy(): void {
    this.querySet.destroy();
    this.resolveBuffer.destroy();
  }
}
