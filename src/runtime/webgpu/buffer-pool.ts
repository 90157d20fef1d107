// Reuses GPU buffers by size class and accounts for every byte. A buffer released while queued-but-unsubmitted
// work may still read it is held back until that work is submitted: after that, queue order makes reuse safe
// (including queue.writeBuffer into the recycled buffer).

export interface MemoryStats {
  /** Bytes held by live tensors and in-flight temporaries (size-class rounded). */
  liveBytes: number;
  peakLiveBytes: number;
  /** Bytes of idle buffers kept for reuse. */
  pooledBytes: number;
  /** All GPU bytes this pool holds (live + pooled + waiting for submit). */
  allocatedBytes: number;
  peakAllocatedBytes: number;
  liveBuffers: number;
  /** Buffers created since start (a measure of how well the pool recycles). */
  createdBuffers: number;
}

/** Size classes: exact to 256 B below 64 KiB, then 8 steps per power of two (at most 12.5% slack). */
export function sizeClass(bytes: number): number {
  const b = Math.max(bytes, 4);
  if (b <= 65536) return Math.ceil(b / 256) * 256;
  const step = 2 ** (Math.floor(Math.log2(b)) - 3);
  return Math.ceil(b / step) * step;
}

/**
 * Idle buffers of one size class, reused first in, first out: work that repeats (a decode step, a loop of ops)
 * then gets the same buffers in the same order each time, so its cached bind groups match again.
 */
class FreeQueue {
  private items: GPUBuffer[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(b: GPUBuffer): void {
    this.items.push(b);
  }

  shift(): GPUBuffer | undefined {
    if (this.head >= this.items.length) return undefined;
    const b = this.items[this.head++];
    if (this.head > 64 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return b;
  }

  drain(): GPUBuffer[] {
    const rest = this.items.slice(this.head);
    this.items = [];
    this.head = 0;
    return rest;
  }
}

export class BufferPool {
  private readonly free = new Map<number, FreeQueue>();
  /**
   * Each buffer's size, as this pool made it: GPUBuffer.size is a call into the native binding (about 0.1-0.2 µs on
   * Dawn in Node), and every eager op acquires and releases a buffer.
   */
  private readonly sizes = new WeakMap<GPUBuffer, number>();
  private waiting: GPUBuffer[] = [];
  private live = 0;
  private liveCount = 0;
  private peakLive = 0;
  private pooled = 0;
  private waitingBytes = 0;
  private peakAllocated = 0;
  private created = 0;

  constructor(
    private readonly device: GPUDevice,
    private readonly usage: GPUBufferUsageFlags,
    /** Idle bytes above this are destroyed instead of pooled. */
    private readonly maxPooledBytes = 512 * 1024 * 1024,
  ) {}

  acquire(bytes: number): GPUBuffer {
    const size = sizeClass(bytes);
    const list = this.free.get(size);
    let buffer = list?.shift();
    if (buffer) {
      this.pooled -= size;
    } else {
      buffer = this.device.createBuffer({ size, usage: this.usage });
      this.sizes.set(buffer, size);
      this.created++;
    }
    this.live += size;
    this.liveCount++;
    this.peakLive = Math.max(this.peakLive, this.live);
    this.peakAllocated = Math.max(this.peakAllocated, this.allocated());
    return buffer;
  }

  /** Returns a buffer; it becomes reusable after the next submit (see class comment). */
  release(buffer: GPUBuffer): void {
    const size = this.sizeOf(buffer);
    this.live -= size;
    this.liveCount--;
    this.waiting.push(buffer);
    this.waitingBytes += size;
  }

  private sizeOf(buffer: GPUBuffer): number {
    return this.sizes.get(buffer) ?? buffer.size;
  }

  /** Bytes released since the last submit, not yet reusable. */
  get waitingForSubmit(): number {
    return this.waitingBytes;
  }

  /** Called after each queue submit: buffers released before it may now be reused. */
  onSubmit(): void {
    for (const buffer of this.waiting) {
      const size = this.sizeOf(buffer);
      if (this.pooled + size > this.maxPooledBytes) {
        buffer.destroy();
        continue;
      }
      let list = this.free.get(size);
      if (!list) this.free.set(size, (list = new FreeQueue()));
      list.push(buffer);
      this.pooled += size;
    }
    this.waiting = [];
    this.waitingBytes = 0;
  }

  /** Destroys idle buffers (torch.mps.empty_cache). */
  emptyCache(): void {
    for (const list of this.free.values()) for (const b of list.drain()) b.destroy();
    this.free.clear();
    this.pooled = 0;
  }

  resetPeak(): void {
    this.peakLive = this.live;
    this.peakAllocated = this.allocated();
  }

  private allocated(): number {
    return this.live + this.pooled + this.waitingBytes;
  }

  stats(): MemoryStats {
    return {
      liveBytes: this.live,
      peakLiveBytes: this.peakLive,
      pooledBytes: this.pooled,
      allocatedBytes: this.allocated(),
      peakAllocatedBytes: this.peakAllocated,
      liveBuffers: this.liveCount,
      createdBuffers: this.created,
    };
  }
}
