// The WebGPU device: buffer pools with accounting, a pipeline cache, and one command encoder that batches every
// dispatch until something is read back.
import { envVar } from '../../core/env.js';
import { allocStorage, castCode, encodeInt64, type StorageArray } from '../../core/codecs.js';
import { DTYPE_INFO, int64WordView, storageWords, type DType } from '../../core/dtype.js';
import { DTypeError } from '../../core/errors.js';
import { DeviceUnavailableError, ShapeError } from '../../core/errors.js';
import { contiguousView, isContiguous, numel, type Shape } from '../../core/shape.js';
import { type Backend, type BinaryOp, isScalarOperand, type Operand, type ScalarOperand, type UnaryOp } from '../backend.js';
import { BufferPool, sizeClass, type MemoryStats } from './buffer-pool.js';
import { bindingSignature, layoutEntries, UniformArena } from './bindings.js';
import { CaptureError, CapturedStep } from './capture.js';
import { GpuProfiler, type KernelTime } from './profiler.js';
import type { GpuBuffer, GpuContext } from './gpu-context.js';
import { binaryKernel, castKernel, fillKernel, scatterKernel, unaryKernel, toGpuOperand, whereKernel, type GpuOperand } from './kernels/elementwise.js';
import { SUBGROUP_PROBE_INVOCATIONS, subgroupProbeKernel } from './kernels/subgroup-probe.js';
import { checkAdapter, OPTIONAL_FEATURES, REQUIRED_LIMITS } from './requirements.js';
import { loadGpu } from './runtime.js';
import { DEVICE_ERROR_WORDS, deviceError } from './kernels/device-error.js';

/** Counters for benchmarks and tests (dispatches per token, submits per read, ...). */
export interface GpuCounters {
  dispatches: number;
  submits: number;
  reads: number;
  pipelinesCompiled: number;
  /** Captured steps replayed (their dispatches are counted in `dispatches` too). */
  replays: number;
  /** Dispatches per kernel family (a pipeline key's first '|' field: 'conv', 'pad', 'gemm', ...). */
  byKernel: Record<string, number>;
}

export interface AdapterDescription {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  features: string[];
}

/** Released-but-unsubmitted bytes that trigger a submit. */
const FLUSH_RELEASED_BYTES = 64 << 20;
/** Pending dispatches after which the batch is submitted anyway, bounding command-buffer size and held buffers. */
const MAX_BATCH = 512;
/** Uniform bytes of one eager batch (MAX_BATCH blocks of up to 256 bytes) and of one captured step. */
const BATCH_UNIFORM_BYTES = MAX_BATCH * 256;
const CAPTURE_UNIFORM_BYTES = 4 << 20;
/** Cached bind groups kept at most (a stale one only costs host memory: buffer ids are never reused). */
const MAX_CACHED_BIND_GROUPS = 8192;

/** Bind groups cached by key path (see WebGpuBackend.bindGroup). */
type BindGroupTrie = Map<object, unknown>;
/** The key of "no uniform buffer" in the bind-group cache. */
const NO_UNIFORM = {};

/** What the backend keeps per pipeline: its layout signature and the kernel family counted in byKernel. */
interface PipelineInfo {
  readonly layout: GPUBindGroupLayout;
  readonly layoutId: number;
  readonly uniform: boolean;
  /** Storage bindings the module declares: a dispatch binds exactly this many buffers. */
  readonly storageBindings: number;
  readonly kernel: string;
}

export class WebGpuBackend implements Backend<GpuBuffer>, GpuContext {
  readonly device = 'webgpu' as const;
  readonly counters: GpuCounters = { dispatches: 0, submits: 0, reads: 0, pipelinesCompiled: 0, replays: 0, byKernel: {} };
  private readonly info = new WeakMap<GPUComputePipeline, PipelineInfo>();
  private readonly layouts = new Map<string, { layout: GPUBindGroupLayout; pipelineLayout: GPUPipelineLayout; id: number }>();
  /** Cached bind groups: one Map level per key (the layout, the uniform buffer, each storage buffer); leaves are groups. */
  private readonly bindGroups: BindGroupTrie = new Map();
  private cachedBindGroups = 0;
  /** The dynamic offset of an eager dispatch (setBindGroup copies it; a recorded dispatch keeps an array of its own). */
  private readonly eagerOffsets = [0];
  private readonly arena: UniformArena;
  /** The step being recorded, if any; its dispatches take their uniforms from its own arena. */
  private recording: CapturedStep | undefined;
  /** Buffers that live captured steps bind, with how many steps bind each; their release waits for those steps. */
  private readonly pinned = new Map<GPUBuffer, number>();
  private readonly releasedWhilePinned = new Set<GPUBuffer>();
  readonly limits: { maxStorageBufferBindingSize: number; maxComputeWorkgroupsPerDimension: number };
  released = false;
  /**
   * Subgroup fast paths on/off (on when the device has them and they passed the layout check; tests turn them off
   * to cover the fallback). Set TENSORGPU_DISABLE_SUBGROUPS=1 to start with them off.
   */
  subgroupsEnabled = false;
  private subgroupMaxSize = 0;
  private subgroupMinSize = 0;
  private readonly storage: BufferPool;
  private readonly uniformAlignment: number;
  private readonly staging: BufferPool;
  /** Pipelines by key, then entry point (two lookups of strings whose hashes are kept, no key string per dispatch). */
  private readonly pipelines = new Map<string, Map<string, GPUComputePipeline>>();
  private readonly modules = new Map<string, GPUShaderModule>();
  /** Each module's binding signature (bindingSignature), for its other entry points. */
  private readonly signatures = new Map<string, string>();
  private encoder: GPUCommandEncoder | undefined;
  private profiler: GpuProfiler | undefined;
  private pass: GPUComputePassEncoder | undefined;
  /** The pipeline last set on `pass` (setPipeline is skipped when it repeats). */
  private passPipeline: GPUComputePipeline | undefined;
  private pending = 0;
  private readonly errors: string[] = [];
  /** The device-side error flag (kernels/device-error.ts), made on first use; armed while a kernel may have set it. */
  private errorFlag: GpuBuffer | undefined;
  private errorFlagArmed = false;
  private lostReason: string | undefined;

  private constructor(
    readonly gpuDevice: GPUDevice,
    readonly adapter: AdapterDescription,
  ) {
    this.storage = new BufferPool(gpuDevice, GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST);
    this.uniformAlignment = gpuDevice.limits.minUniformBufferOffsetAlignment;
    this.arena = new UniformArena(gpuDevice, BATCH_UNIFORM_BYTES, this.uniformAlignment, 'tensorgpu uniforms');
    this.staging = new BufferPool(gpuDevice, GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST, 64 << 20);
    this.limits = {
      maxStorageBufferBindingSize: gpuDevice.limits.maxStorageBufferBindingSize,
      maxComputeWorkgroupsPerDimension: gpuDevice.limits.maxComputeWorkgroupsPerDimension,
    };
    // Validation errors surface asynchronously; keep them and fail the next read instead of returning garbage.
    gpuDevice.addEventListener('uncapturederror', (ev) => {
      this.errors.push((ev as GPUUncapturedErrorEvent).error.message);
    });
    void gpuDevice.lost.then((info) => {
      if (!this.released) this.lostReason = `${info.reason}: ${info.message}`;
    });
  }

  static async create(): Promise<WebGpuBackend> {
    const { gpu, source } = await loadGpu();
    // Compatibility mode (OpenGL ES, e.g. Mesa llvmpipe) is the fallback where no core adapter exists.
    const adapter =
      (await gpu.requestAdapter({ powerPreference: 'high-performance' })) ??
      (await gpu.requestAdapter({ featureLevel: 'compatibility' } as GPURequestAdapterOptions));
    if (!adapter) throw new DeviceUnavailableError(`no WebGPU adapter from ${source}`);
    const limits: Record<string, number> = {};
    for (const name of Object.keys(REQUIRED_LIMITS)) limits[name] = (adapter.limits as unknown as Record<string, number>)[name];
    const check = checkAdapter(limits, adapter.features);
    if (!check.ok) throw new DeviceUnavailableError(`the WebGPU adapter is below tensorgpu's requirements: ${check.missing.join('; ')}`);
    const features = OPTIONAL_FEATURES.filter((f) => adapter.features.has(f)) as GPUFeatureName[];
    // Ask for the adapter's full limits: defaults cap bindings at 128 MiB, too small for large weights.
    const requiredLimits: Record<string, number> = {};
    for (const name of [
      'maxStorageBufferBindingSize',
      'maxBufferSize',
      'maxComputeWorkgroupStorageSize',
      'maxComputeInvocationsPerWorkgroup',
      'maxComputeWorkgroupSizeX',
      'maxStorageBuffersPerShaderStage',
    ]) {
      requiredLimits[name] = (adapter.limits as unknown as Record<string, number>)[name];
    }
    const device = await adapter.requestDevice({ requiredFeatures: features, requiredLimits });
    const info = adapter.info;
    const backend = new WebGpuBackend(device, {
      vendor: info.vendor,
      architecture: info.architecture,
      device: info.device,
      description: info.description,
      features: [...adapter.features].map(String).sort(),
    });
    if (features.includes('subgroups' as GPUFeatureName) && envVar('TENSORGPU_DISABLE_SUBGROUPS') !== '1') {
      const sizes = info as GPUAdapterInfo & { subgroupMinSize?: number; subgroupMaxSize?: number };
      backend.subgroupMaxSize = sizes.subgroupMaxSize ?? 0;
      backend.subgroupMinSize = sizes.subgroupMinSize ?? 0;
      backend.subgroupsEnabled = backend.subgroupMaxSize > 0 && (await subgroupLayoutIsLinear(backend));
    }
    return backend;
  }

  // ---- GpuContext ----
  deviceErrorFlag(): GpuBuffer {
    // Armed: the next read back (or synchronize) also reads the flag. A replayed step that binds it arms it again.
    this.errorFlagArmed = true;
    if (!this.errorFlag) {
      const buffer = this.gpuDevice.createBuffer({
        label: 'tensorgpu device error flag',
        size: DEVICE_ERROR_WORDS * 4,
        usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
      });
      this.errorFlag = { buffer, size: DEVICE_ERROR_WORDS * 4 };
    }
    return this.errorFlag;
  }

  /** Copies the error flag to `staging` at byte `at` and zeroes it, in the open encoder (an armed flag only). */
  private encodeErrorFlagRead(staging: GPUBuffer, at: number): boolean {
    if (!this.errorFlagArmed || !this.errorFlag) return false;
    this.errorFlagArmed = false;
    this.pass?.end();
    this.pass = undefined;
    this.passPipeline = undefined;
    this.encoder ??= this.gpuDevice.createCommandEncoder();
    this.encoder.copyBufferToBuffer(this.errorFlag.buffer, 0, staging, at, DEVICE_ERROR_WORDS * 4);
    this.encoder.clearBuffer(this.errorFlag.buffer);
    return true;
  }

  subgroupReduce(groupSize: number): boolean {
    // Subgroup sizes are powers of two, so every size up to the maximum divides a power-of-two group.
    return this.subgroupsEnabled && this.subgroupMaxSize <= groupSize;
  }

  subgroupShareWidth(limit: number): number {
    // Subgroups are aligned runs of consecutive invocations (subgroupLayoutIsLinear) whose power-of-two size is at
    // least subgroupMinSize, so every aligned group of min(limit, subgroupMinSize) invocations lies in one of them.
    return this.subgroupsEnabled ? Math.min(limit, this.subgroupMinSize) : 0;
  }

  alloc(bytes: number): GpuBuffer {
    this.checkAlive();
    if (bytes > this.limits.maxStorageBufferBindingSize) {
      throw new ShapeError(`a tensor of ${bytes} bytes exceeds this adapter's maxStorageBufferBindingSize (${this.limits.maxStorageBufferBindingSize} bytes)`);
    }
    const recording = this.recording;
    if (recording) {
      // Inside a recording a released buffer serves the step's later allocations (dispatches run in queue order, and
      // no host write can land in between): its intermediates are planned by lifetime, not one buffer each.
      const size = sizeClass(bytes);
      const reused = recording.reusable.get(size)?.pop();
      if (reused) return { buffer: reused, size };
      const buffer = this.storage.acquire(size);
      recording.allocated.add(buffer);
      return { buffer, size };
    }
    // The pool makes every buffer of its size class (sizeClass(size) is size): GPUBuffer.size would be a call into
    // the native binding on every eager op.
    const size = sizeClass(bytes);
    return { buffer: this.storage.acquire(size), size };
  }

  release(b: GpuBuffer): void {
    if (this.released) return;
    const recording = this.recording;
    if (recording?.allocated.has(b.buffer)) {
      const size = b.buffer.size;
      const free = recording.reusable.get(size);
      if (free) free.push(b.buffer);
      else recording.reusable.set(size, [b.buffer]);
      return;
    }
    if (this.pinned.has(b.buffer)) {
      // A captured step still binds it: it is freed when the last such step is disposed.
      this.releasedWhilePinned.add(b.buffer);
      return;
    }
    this.storage.release(b.buffer);
    // Released buffers become reusable only after a submit; submitting early keeps a long batch (a model load
    // quantizing layer after layer) from growing the pool with buffers it cannot reuse yet.
    if (this.storage.waitingForSubmit >= FLUSH_RELEASED_BYTES) this.flush();
  }

  pipeline(key: string, build: () => string, entryPoint = 'main'): GPUComputePipeline {
    let byEntry = this.pipelines.get(key);
    let p = byEntry?.get(entryPoint);
    if (!p) {
      const cacheKey = `${key}#${entryPoint}`;
      // One module per key: entry points of the same source share it.
      let module = this.modules.get(key);
      let signature = this.signatures.get(key);
      if (!module || signature === undefined) {
        const code = build();
        module = this.gpuDevice.createShaderModule({ code, label: key });
        signature = bindingSignature(code);
        this.modules.set(key, module);
        this.signatures.set(key, signature);
      }
      const layout = this.layoutFor(signature);
      p = this.gpuDevice.createComputePipeline({ layout: layout.pipelineLayout, compute: { module, entryPoint }, label: cacheKey });
      if (!byEntry) this.pipelines.set(key, (byEntry = new Map()));
      byEntry.set(entryPoint, p);
      const uniform = signature.startsWith('u');
      this.info.set(p, {
        layout: layout.layout,
        layoutId: layout.id,
        uniform,
        storageBindings: signature.length - (uniform ? 1 : 0),
        kernel: key.split('|')[0],
      });
      this.counters.pipelinesCompiled++;
    }
    return p;
  }

  private layoutFor(signature: string): { layout: GPUBindGroupLayout; pipelineLayout: GPUPipelineLayout; id: number } {
    let l = this.layouts.get(signature);
    if (!l) {
      const layout = this.gpuDevice.createBindGroupLayout({ entries: layoutEntries(signature), label: `bindings ${signature}` });
      l = { layout, pipelineLayout: this.gpuDevice.createPipelineLayout({ bindGroupLayouts: [layout] }), id: this.layouts.size };
      this.layouts.set(signature, l);
    }
    return l;
  }

  /**
   * The bind group of `buffers` (after the uniform, when the layout has one), cached by layout and buffers. The
   * lookup walks Maps keyed by the objects themselves and builds no key string: it runs on every eager dispatch.
   */
  private bindGroup(info: PipelineInfo, uniform: GPUBuffer | undefined, buffers: readonly GpuBuffer[]): GPUBindGroup {
    let node = this.bindGroups.get(info.layout) as BindGroupTrie | undefined;
    if (!node) this.bindGroups.set(info.layout, (node = new Map()));
    let key: object = uniform ?? NO_UNIFORM;
    for (let i = 0; i < buffers.length; i++) {
      let next = node.get(key) as BindGroupTrie | undefined;
      if (!next) node.set(key, (next = new Map()));
      node = next;
      key = buffers[i].buffer;
    }
    let group = node.get(key) as GPUBindGroup | undefined;
    if (!group) {
      // A stale group only costs host memory (a buffer object is never reused for another buffer); past the bound
      // the cache starts over.
      if (this.cachedBindGroups >= MAX_CACHED_BIND_GROUPS) {
        this.bindGroups.clear();
        this.cachedBindGroups = 0;
        return this.bindGroup(info, uniform, buffers);
      }
      const entries: GPUBindGroupEntry[] = [];
      if (uniform) entries.push({ binding: 0, resource: { buffer: uniform, size: UniformArena.BINDING_SIZE } });
      const first = uniform ? 1 : 0;
      for (let i = 0; i < buffers.length; i++) entries.push({ binding: i + first, resource: { buffer: buffers[i].buffer } });
      group = this.gpuDevice.createBindGroup({ layout: info.layout, entries });
      node.set(key, group);
      this.cachedBindGroups++;
    }
    return group;
  }

  dispatch(
    pipeline: GPUComputePipeline,
    params: ArrayBuffer | null,
    buffers: readonly GpuBuffer[],
    grid: readonly [number, number, number],
    bytes?: number,
  ): void {
    this.checkAlive();
    const info = this.info.get(pipeline);
    if (!info) throw new Error(`dispatch: pipeline ${pipeline.label} was not made by this backend's pipeline()`);
    if (info.uniform !== (params !== null))
      throw new Error(
        `dispatch: ${pipeline.label} ${info.uniform ? 'declares a uniform block but got no params' : 'declares no uniform block but got params'}`,
      );
    if (buffers.length !== info.storageBindings)
      throw new Error(`dispatch: ${pipeline.label} declares ${info.storageBindings} storage bindings but got ${buffers.length} buffers`);
    const recording = this.recording;
    let offsets: number[] | undefined;
    let arena: UniformArena | undefined;
    if (params) {
      arena = recording ? recording.arena : this.arena;
      if (!arena.fits(params.byteLength)) {
        if (recording) throw new CaptureError(`a captured step holds at most ${CAPTURE_UNIFORM_BYTES} bytes of uniforms`);
        this.flush();
      }
      const offset = arena.push(params);
      if (recording) offsets = [offset];
      else (offsets = this.eagerOffsets)[0] = offset;
    }
    const bindGroup = this.bindGroup(info, arena?.buffer, buffers);
    this.encode(pipeline, bindGroup, offsets, grid, info.kernel, bytes);
    this.counters.dispatches++;
    this.counters.byKernel[info.kernel] = (this.counters.byKernel[info.kernel] ?? 0) + 1;
    if (recording) {
      recording.record({ pipeline, bindGroup, offsets, grid: [grid[0], grid[1], grid[2]], kernel: info.kernel, bytes, buffers: [...buffers] });
      for (const b of buffers) this.pin(recording, b.buffer);
    }
    if (++this.pending >= MAX_BATCH) this.flush();
  }

  /** Encodes one dispatch into the open pass (or, while profiling, into a timestamped pass of its own). */
  private encode(
    pipeline: GPUComputePipeline,
    bindGroup: GPUBindGroup,
    offsets: number[] | undefined,
    grid: readonly [number, number, number],
    kernel: string,
    bytes: number | undefined,
  ): void {
    this.encoder ??= this.gpuDevice.createCommandEncoder();
    const profiler = this.profiler;
    if (profiler) {
      this.pass?.end();
      this.pass = this.encoder.beginComputePass(profiler.passFor(kernel, bytes));
      this.passPipeline = undefined;
    }
    const pass = (this.pass ??= this.encoder.beginComputePass());
    if (this.passPipeline !== pipeline) pass.setPipeline((this.passPipeline = pipeline));
    if (offsets) pass.setBindGroup(0, bindGroup, offsets);
    else pass.setBindGroup(0, bindGroup);
    pass.dispatchWorkgroups(grid[0], grid[1], grid[2]);
    if (profiler) {
      pass.end();
      this.pass = undefined;
      this.passPipeline = undefined;
      if (profiler.full) this.flush();
    }
  }

  // ---- GPU time per kernel (timestamp queries) ----

  /** Whether this device can time kernels (the adapter has 'timestamp-query'). */
  get canProfile(): boolean {
    return this.gpuDevice.features.has('timestamp-query');
  }

  /** Starts timing every dispatch (each in its own pass); throws when the device has no timestamp queries. */
  startProfiling(): void {
    if (!this.canProfile)
      throw new DeviceUnavailableError("this adapter has no 'timestamp-query' feature", 'profiling needs GPU timestamps; run without --profile');
    this.flush();
    this.profiler ??= new GpuProfiler(this.gpuDevice);
  }

  /** Stops timing and returns GPU time per kernel family since startProfiling (or the last reset). */
  async stopProfiling(): Promise<KernelTime[]> {
    const profiler = this.profiler;
    if (!profiler) return [];
    this.flush();
    this.profiler = undefined;
    const results = await profiler.results();
    profiler.destroy();
    return results;
  }

  /** Drops the timings collected so far (e.g. after warm-up steps); timing continues. */
  async resetProfile(): Promise<void> {
    this.flush();
    await this.profiler?.results();
    this.profiler?.reset();
  }

  // ---- captured steps ----

  /**
   * Starts recording: until endCapture(), every dispatch runs as usual and is also recorded (pipeline, bind group,
   * uniform block, grid). The buffers it binds stay reserved for the step (released ones are freed when the step
   * is disposed). Host writes into buffers (upload, writeBytes) and reads are not allowed while recording: a
   * replay could not repeat them.
   */
  beginCapture(label: string): void {
    this.checkAlive();
    if (this.recording) throw new CaptureError(`already recording step '${this.recording.label}'`);
    this.recording = new CapturedStep(label, new UniformArena(this.gpuDevice, CAPTURE_UNIFORM_BYTES, this.uniformAlignment, `captured step ${label}`), (step) =>
      this.unpinStep(step),
    );
  }

  /** Ends recording and returns the step (an empty one when nothing was dispatched). */
  endCapture(): CapturedStep {
    const step = this.recording;
    if (!step) throw new CaptureError('endCapture without beginCapture');
    this.recording = undefined;
    step.arena.upload();
    this.settleReusable(step);
    return step;
  }

  /** What a step released for reuse: freed when the step is disposed where it binds them, else now. */
  private settleReusable(step: CapturedStep): void {
    for (const free of step.reusable.values()) {
      for (const buffer of free) {
        if (step.buffers.has(buffer)) this.releasedWhilePinned.add(buffer);
        else this.storage.release(buffer);
      }
    }
    step.reusable.clear();
    step.allocated.clear();
  }

  /** Drops the step being recorded (after an error inside it); what it ran stays queued. */
  abortCapture(): void {
    const step = this.recording;
    this.recording = undefined;
    if (!step) return;
    // The dispatches recorded so far are encoded but not submitted yet, and they bind the step's uniform arena:
    // submit them before the arena is destroyed (else the next submit fails with "used in submit while destroyed").
    this.flush();
    this.settleReusable(step);
    step.dispose();
  }

  /**
   * Encodes a recorded step again: no tensors, no shapes, no allocation, no bind groups, no uniform writes. With
   * `substitute`, the dispatches that bind one of its keys bind its value instead (same size or larger: the recorded
   * kernels chose their bindings for the recorded sizes); their bind groups come from the cache.
   */
  replay(step: CapturedStep, substitute?: ReadonlyMap<GPUBuffer, GpuBuffer>): void {
    this.checkAlive();
    if (this.recording) throw new CaptureError(`cannot replay '${step.label}' while recording '${this.recording.label}'`);
    step.checkLive();
    if (this.errorFlag && step.buffers.has(this.errorFlag.buffer)) this.errorFlagArmed = true;
    for (const d of step.dispatches) {
      let bindGroup = d.bindGroup;
      if (substitute?.size && d.buffers.some((b) => substitute.has(b.buffer))) {
        const info = this.info.get(d.pipeline)!;
        bindGroup = this.bindGroup(
          info,
          info.uniform ? step.arena.buffer : undefined,
          d.buffers.map((b) => substitute.get(b.buffer) ?? b),
        );
      }
      this.encode(d.pipeline, bindGroup, d.offsets, d.grid, d.kernel, d.bytes);
    }
    this.counters.dispatches += step.dispatches.length;
    for (const [kernel, n] of step.kernelCounts) this.counters.byKernel[kernel] = (this.counters.byKernel[kernel] ?? 0) + n;
    this.counters.replays++;
    this.pending += step.dispatches.length;
    if (this.pending >= MAX_BATCH) this.flush();
  }

  /**
   * Keeps buffers from being reused until the returned function is called, even if their tensors are released
   * meanwhile (compile() holds what a traced function read until it has recorded it).
   */
  hold(buffers: Iterable<GPUBuffer>): () => void {
    const held = [...new Set(buffers)];
    for (const b of held) this.pinned.set(b, (this.pinned.get(b) ?? 0) + 1);
    let done = false;
    return () => {
      if (done || this.released) return;
      done = true;
      for (const b of held) {
        const n = (this.pinned.get(b) ?? 1) - 1;
        if (n > 0) this.pinned.set(b, n);
        else {
          this.pinned.delete(b);
          if (this.releasedWhilePinned.delete(b)) this.storage.release(b);
        }
      }
    };
  }

  private pin(step: CapturedStep, buffer: GPUBuffer): void {
    if (step.buffers.has(buffer)) return;
    step.buffers.add(buffer);
    this.pinned.set(buffer, (this.pinned.get(buffer) ?? 0) + 1);
  }

  private unpinStep(step: CapturedStep): void {
    if (this.recording === step) this.recording = undefined;
    step.arena.destroy();
    if (this.released) return;
    for (const buffer of step.buffers) {
      const n = (this.pinned.get(buffer) ?? 1) - 1;
      if (n > 0) {
        this.pinned.set(buffer, n);
        continue;
      }
      this.pinned.delete(buffer);
      if (this.releasedWhilePinned.delete(buffer)) this.storage.release(buffer);
    }
  }

  private refuseWhileRecording(what: string): void {
    if (this.recording) throw new CaptureError(`${what} while recording step '${this.recording.label}': a replay could not repeat it`);
  }

  /** Submits all queued work. */
  flush(): void {
    if (this.encoder) {
      this.arena.upload();
      this.recording?.arena.upload();
      this.pass?.end();
      const collect = this.profiler?.resolve(this.encoder);
      this.gpuDevice.queue.submit([this.encoder.finish()]);
      this.counters.submits++;
      collect?.();
    }
    this.encoder = undefined;
    this.pass = undefined;
    this.passPipeline = undefined;
    this.pending = 0;
    this.arena.reset();
    this.storage.onSubmit();
    this.staging.onSubmit();
  }

  // ---- Backend ----
  // int64 moves as the int32 view of its words (int64Words); its arithmetic lives in kernels/int64/.
  upload(_dtype: DType, data: StorageArray): GpuBuffer {
    this.refuseWhileRecording('a host upload');
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const out = this.alloc(Math.max(4, bytes.byteLength));
    const padded = bytes.byteLength % 4 === 0 ? bytes : copyPadded(bytes);
    if (padded.byteLength > 0) this.gpuDevice.queue.writeBuffer(out.buffer, 0, padded);
    return out;
  }

  allocBytes(dtype: DType, n: number): GpuBuffer {
    return this.alloc(4 * storageWords(dtype, n));
  }

  writeBytes(handle: GpuBuffer, byteOffset: number, bytes: Uint8Array): void {
    if (byteOffset % 4 !== 0) throw new RangeError(`writeBytes: offset ${byteOffset} is not a multiple of 4`);
    this.refuseWhileRecording('a host write');
    const padded = bytes.byteLength % 4 === 0 ? bytes : copyPadded(bytes);
    if (padded.byteLength > 0) this.gpuDevice.queue.writeBuffer(handle.buffer, byteOffset, padded);
  }

  fill(dtype: DType, n: number, value: number): GpuBuffer {
    // int64: n pairs of words, the int32 fill when both words match (0, -1), else an upload of the pattern.
    if (dtype === 'int64') {
      const [lo, hi] = encodeInt64([value]);
      if (lo === hi) return fillKernel(this, 'int32', 2 * n, lo);
      const words = new Int32Array(2 * n);
      for (let i = 0; i < n; i++) [words[2 * i], words[2 * i + 1]] = [lo, hi];
      return this.upload(dtype, words);
    }
    // The kernel takes the element's raw storage bits (a float32 code is its bit pattern, not its value).
    const one = allocStorage(dtype, 1);
    one[0] = castCode(value, dtype);
    const bytes = new Uint8Array(one.buffer, 0, DTYPE_INFO[dtype].itemBytes);
    const bits = bytes.reduce((acc, b, i) => acc + b * 2 ** (8 * i), 0);
    return fillKernel(this, dtype, n, bits);
  }

  free(handle: GpuBuffer): void {
    this.release(handle);
  }

  async read(src: Operand<GpuBuffer>): Promise<StorageArray> {
    this.refuseWhileRecording('a read');
    const n = numel(src.view.shape);
    const item = DTYPE_INFO[src.dtype].itemBytes;
    const start = src.view.offset * item;
    // Contiguous word-aligned views are copied straight out; anything else is compacted on the GPU first.
    const direct = isContiguous(src.view) && start % 4 === 0;
    const from = direct
      ? src.handle
      : src.dtype === 'int64'
        ? castKernel(this, int64Words(src), 'int32', false)
        : castKernel(this, toGpuOperand(src), src.dtype, false);
    const offset = direct ? start : 0;
    const size = Math.max(4, Math.ceil((n * item) / 4) * 4);
    // An armed error flag rides in the same staging buffer, after the data: one map for both.
    const flagged = this.errorFlagArmed && this.errorFlag !== undefined;
    // getMappedRange takes offsets in multiples of 8.
    const flagAt = Math.ceil(size / 8) * 8;
    const mapped = flagged ? flagAt + DEVICE_ERROR_WORDS * 4 : size;
    const staging = this.staging.acquire(mapped);
    try {
      if (n > 0) {
        this.pass?.end();
        this.pass = undefined;
        this.passPipeline = undefined;
        this.encoder ??= this.gpuDevice.createCommandEncoder();
        this.encoder.copyBufferToBuffer(from.buffer, offset, staging, 0, size);
      }
      if (!direct) this.release(from);
      if (flagged) this.encodeErrorFlagRead(staging, flagAt);
      this.flush();
      this.counters.reads++;
      await staging.mapAsync(GPUMapMode.READ, 0, mapped);
      this.throwPendingErrors();
      const out = allocStorage(src.dtype, n);
      new Uint8Array(out.buffer).set(new Uint8Array(staging.getMappedRange(0, size), 0, n * item));
      let error: Error | undefined;
      try {
        if (flagged) error = deviceError(new Uint32Array(staging.getMappedRange(flagAt, DEVICE_ERROR_WORDS * 4).slice(0)));
      } finally {
        staging.unmap();
      }
      if (error) throw error;
      return out;
    } catch (err) {
      this.throwPendingErrors();
      throw err;
    } finally {
      this.staging.release(staging);
    }
  }

  /** Reads and clears an armed error flag, throwing what a kernel reported (synchronize's check). */
  private async checkDeviceErrors(): Promise<void> {
    if (!this.errorFlagArmed || !this.errorFlag) return;
    const bytes = DEVICE_ERROR_WORDS * 4;
    const staging = this.staging.acquire(bytes);
    try {
      this.encodeErrorFlagRead(staging, 0);
      this.flush();
      await staging.mapAsync(GPUMapMode.READ, 0, bytes);
      let error: Error | undefined;
      try {
        error = deviceError(new Uint32Array(staging.getMappedRange(0, bytes).slice(0)));
      } finally {
        staging.unmap();
      }
      if (error) throw error;
    } finally {
      this.staging.release(staging);
    }
  }

  cast(src: Operand<GpuBuffer>, outDtype: DType, saturate: boolean): GpuBuffer {
    if (src.dtype === 'int64' && outDtype === 'int64') return castKernel(this, int64Words(src), 'int32', false);
    if (src.dtype === 'int64' || outDtype === 'int64')
      throw new DTypeError(`the backend cast ${src.dtype} -> ${outDtype} does not take int64 (ops/convert routes it to the int64 kernels)`);
    return castKernel(this, toGpuOperand(src), outDtype, saturate);
  }

  copyInto(src: Operand<GpuBuffer>, dst: Operand<GpuBuffer>): void {
    if (src.dtype === 'int64' && dst.dtype === 'int64') return scatterKernel(this, int64Words(src), int64Words(dst));
    scatterKernel(this, toGpuOperand(src), toGpuOperand(dst));
  }

  unary(op: UnaryOp, x: Operand<GpuBuffer>, outDtype: DType): GpuBuffer {
    return unaryKernel(this, op, toGpuOperand(x), outDtype);
  }

  binary(op: BinaryOp, a: Operand<GpuBuffer> | ScalarOperand, b: Operand<GpuBuffer> | ScalarOperand, outShape: Shape, outDtype: DType): GpuBuffer {
    return binaryKernel(this, op, mapInput(a), mapInput(b), outShape, outDtype);
  }

  where(cond: Operand<GpuBuffer>, a: Operand<GpuBuffer> | ScalarOperand, b: Operand<GpuBuffer> | ScalarOperand, outShape: Shape, outDtype: DType): GpuBuffer {
    if (outDtype === 'int64') {
      if (isScalarOperand(a) || isScalarOperand(b) || a.dtype !== 'int64' || b.dtype !== 'int64')
        throw new DTypeError('where with a number or a non-int64 side does not support an int64 result (ops/elementwise converts them)');
      // The condition repeats over each element's two words.
      const pairs = {
        buffer: cond.handle,
        dtype: cond.dtype,
        view: { shape: [...cond.view.shape, 2], strides: [...cond.view.strides, 0], offset: cond.view.offset },
      };
      return whereKernel(this, pairs, int64Words(a), int64Words(b), [...outShape, 2], 'int32');
    }
    return whereKernel(this, toGpuOperand(cond), mapInput(a), mapInput(b), outShape, outDtype);
  }

  /** GEMV for decode shapes (M <= 4, [N, K] weights), else the tiled GEMM; both dequantize FP8 on load. */
  // ---- lifecycle and stats ----
  memoryStats(): MemoryStats {
    return this.storage.stats();
  }

  resetPeakMemory(): void {
    this.storage.resetPeak();
  }

  emptyCache(): void {
    this.flush();
    this.storage.emptyCache();
  }

  /** Waits until the GPU has finished all submitted work (for timing). */
  async synchronize(): Promise<void> {
    this.flush();
    await this.gpuDevice.queue.onSubmittedWorkDone();
    this.throwPendingErrors();
    await this.checkDeviceErrors();
  }

  destroy(): void {
    if (this.released) return;
    this.released = true;
    this.recording = undefined;
    this.encoder = undefined;
    this.pass = undefined;
    this.gpuDevice.destroy();
  }

  private checkAlive(): void {
    if (this.lostReason) throw new DeviceUnavailableError(`the WebGPU device was lost (${this.lostReason})`, 'call initDevice() again to get a new device');
    if (this.released) throw new DeviceUnavailableError('the WebGPU device was released', "call initDevice('webgpu') again");
  }

  private throwPendingErrors(): void {
    if (this.errors.length) {
      const msgs = this.errors.splice(0);
      throw new Error(`WebGPU reported ${msgs.length} error(s) in queued work: ${msgs.join(' | ')}`);
    }
  }
}

/**
 * WGSL does not promise that a subgroup holds consecutive invocations of a 1-D workgroup, but kernels that reduce
 * per group of consecutive invocations need it: check once on this device (one dispatch and a read).
 */
async function subgroupLayoutIsLinear(backend: WebGpuBackend): Promise<boolean> {
  const out = backend.alloc(SUBGROUP_PROBE_INVOCATIONS * 4);
  try {
    subgroupProbeKernel(backend, out);
    const flags = (await backend.read({ handle: out, dtype: 'int32', view: contiguousView([SUBGROUP_PROBE_INVOCATIONS]) })) as Int32Array;
    return flags.every((f) => f === 1);
  } catch {
    return false;
  } finally {
    backend.release(out);
  }
}

/** A backend operand as the map kernels take it (a JS number passes as it is). */
function mapInput(x: Operand<GpuBuffer> | ScalarOperand): GpuOperand | ScalarOperand {
  return isScalarOperand(x) ? x : toGpuOperand(x);
}

function copyPadded(bytes: Uint8Array): Uint8Array {
  const out = new Uint8Array(Math.ceil(bytes.byteLength / 4) * 4);
  out.set(bytes);
  return out;
}

/** An int64 operand as the int32 operand of its words: how int64 data moves through the int32 copy kernels. */
function int64Words(x: Operand<GpuBuffer>): GpuOperand {
  return { buffer: x.handle, dtype: 'int32', view: int64WordView(x.view) };
}
