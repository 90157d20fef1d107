// A recorded step (the CUDA-graph / ONNX Runtime WebGPU graph-capture idea): for each dispatch its pipeline, bind
// group, uniform offset and grid, so that replaying it is only setPipeline / setBindGroup / dispatchWorkgroups.
// What changes between replays must live in buffers the caller rewrites (a decode step's position, its sampler
// draw, its input token), never in the recorded uniforms.
import { CaptureError } from '../../core/errors.js';
import type { UniformArena } from './bindings.js';
import type { GpuBuffer } from './gpu-context.js';

export { CaptureError };

export interface RecordedDispatch {
  readonly pipeline: GPUComputePipeline;
  readonly bindGroup: GPUBindGroup;
  readonly offsets: number[] | undefined;
  readonly grid: readonly [number, number, number];
  readonly kernel: string;
  /** Bytes moved, where the launcher said (replays move the same: their shapes are the recorded ones). */
  readonly bytes: number | undefined;
  /** The storage buffers bound, in binding order (a replay may substitute some: compile()'s inputs and outputs). */
  readonly buffers: readonly GpuBuffer[];
}

export class CapturedStep {
  readonly dispatches: RecordedDispatch[] = [];
  /** Every buffer the recorded bind groups reference (reserved by the backend until dispose). */
  readonly buffers = new Set<GPUBuffer>();
  /** Dispatches per kernel family, for the backend's counters. */
  readonly kernelCounts = new Map<string, number>();
  /** Buffers allocated while recording: one released before the step ends may serve a later allocation in it. */
  readonly allocated = new Set<GPUBuffer>();
  /** Those released while recording, by size class, waiting for a later allocation of the step. */
  readonly reusable = new Map<number, GPUBuffer[]>();
  private disposed = false;

  constructor(
    readonly label: string,
    readonly arena: UniformArena,
    private readonly onDispose: (step: CapturedStep) => void,
  ) {}

  record(d: RecordedDispatch): void {
    this.dispatches.push(d);
    this.kernelCounts.set(d.kernel, (this.kernelCounts.get(d.kernel) ?? 0) + 1);
  }

  checkLive(): void {
    if (this.disposed) throw new CaptureError(`captured step '${this.label}' was disposed`);
  }

  /** Frees its uniforms and lets the backend free the buffers that were released while it was alive. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.onDispose(this);
  }
}
