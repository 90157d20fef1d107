// The WebGPU device: buffer pools with accounting, a pipeline cache, and one command encoder that batches every
// dispatch until something is read back.
import type { StorageArray } from '../../core/codecs.js';
import { allocStorage } from '../../core/codecs.js';
import { DTYPE_INFO, lanesPerWord, type DType } from '../../core/dtype.js';
import { DeviceUnavailableError, ShapeError } from '../../core/errors.js';
import { contiguousView, isContiguous, numel, type Shape } from '../../core/shape.js';
import type { AttentionOptions, Backend, BinaryOp, ConvGeometry, ExpertLinearOptions, MatmulDims, MatmulScaling, Operand, PadMode, QuantizeBlocks, ReduceOp, SamplingParams, UnaryOp, UpsampleMode } from '../backend.js';
import { castCode } from '../cpu/cpu-backend.js';
import { BufferPool, type MemoryStats } from './buffer-pool.js';
import { wordBytes, type GpuBuffer, type GpuContext } from './gpu-context.js';
import { binaryKernel, castKernel, fillKernel, scatterKernel, unaryKernel, type GpuOperand } from './kernels/elementwise.js';
import { gemmKernel, type GemmScaling } from './kernels/gemm.js';
import { gemvApplies, gemvKernel } from './kernels/gemv.js';
import { gatherKernel } from './kernels/gather.js';
import { indexSelectKernel } from './kernels/index-select.js';
import { attentionKernel } from './kernels/attention.js';
import { convKernel } from './kernels/conv.js';
import { padKernel } from './kernels/pad.js';
import { channelRmsNormKernel } from './kernels/channel-rms-norm.js';
import { groupNormKernel } from './kernels/group-norm.js';
import { upsample2xKernel } from './kernels/upsample.js';
import { withContiguous } from './kernels/nn-util.js';
import { expertLinearKernel } from './kernels/expert-linear.js';
import { moeRouteKernel } from './kernels/moe-route.js';
import { quantizeBlocksKernel } from './kernels/quantize-blocks.js';
import { rmsNormKernel } from './kernels/rms-norm.js';
import { ropeKernel } from './kernels/rope.js';
import { swigluKernel } from './kernels/swiglu.js';
import { reduceKernel } from './kernels/reduce.js';
import { sampleKernel } from './kernels/sample.js';
import { softmaxKernel } from './kernels/softmax.js';
import { checkAdapter, OPTIONAL_FEATURES, REQUIRED_LIMITS } from './requirements.js';
import { loadGpu } from './runtime.js';

/** Counters for benchmarks and tests (dispatches per token, submits per read, ...). */
export interface GpuCounters {
  dispatches: number;
  submits: number;
  reads: number;
  pipelinesCompiled: number;
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

/** Pending dispatches after which the batch is submitted anyway, bounding command-buffer size and held buffers. */
/** Released-but-unsubmitted bytes that trigger a submit. */
const FLUSH_RELEASED_BYTES = 64 << 20;
const MAX_BATCH = 512;

export class WebGpuBackend implements Backend<GpuBuffer>, GpuContext {
  readonly device = 'webgpu' as const;
  readonly counters: GpuCounters = { dispatches: 0, submits: 0, reads: 0, pipelinesCompiled: 0, byKernel: {} };
  private readonly kernelOf = new WeakMap<GPUComputePipeline, string>();
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
  private readonly uniforms: BufferPool;
  private readonly staging: BufferPool;
  private readonly pipelines = new Map<string, GPUComputePipeline>();
  private readonly modules = new Map<string, GPUShaderModule>();
  private encoder: GPUCommandEncoder | undefined;
  private pass: GPUComputePassEncoder | undefined;
  private pending = 0;
  private readonly errors: string[] = [];
  private lostReason: string | undefined;

  private constructor(
    readonly gpuDevice: GPUDevice,
    readonly adapter: AdapterDescription,
  ) {
    this.storage = new BufferPool(gpuDevice, GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST);
    this.uniforms = new BufferPool(gpuDevice, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST, 1 << 20);
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
    for (const name of ['maxStorageBufferBindingSize', 'maxBufferSize', 'maxComputeWorkgroupStorageSize', 'maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupSizeX', 'maxStorageBuffersPerShaderStage']) {
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
    if (features.includes('subgroups' as GPUFeatureName) && process.env.TENSORGPU_DISABLE_SUBGROUPS !== '1') {
      const sizes = info as GPUAdapterInfo & { subgroupMinSize?: number; subgroupMaxSize?: number };
      backend.subgroupMaxSize = sizes.subgroupMaxSize ?? 0;
      backend.subgroupMinSize = sizes.subgroupMinSize ?? 0;
      backend.subgroupsEnabled = backend.subgroupMaxSize > 0 && (await subgroupLayoutIsLinear(backend));
    }
    return backend;
  }

  // ---- GpuContext ----
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
    const buffer = this.storage.acquire(bytes);
    return { buffer, size: buffer.size };
  }

  release(b: GpuBuffer): void {
    if (this.released) return;
    this.storage.release(b.buffer);
    // Released buffers become reusable only after a submit; submitting early keeps a long batch (a model load
    // quantizing layer after layer) from growing the pool with buffers it cannot reuse yet.
    if (this.storage.waitingForSubmit >= FLUSH_RELEASED_BYTES) this.flush();
  }

  pipeline(key: string, build: () => string, entryPoint = 'main'): GPUComputePipeline {
    const cacheKey = `${key}#${entryPoint}`;
    let p = this.pipelines.get(cacheKey);
    if (!p) {
      // One module per key: entry points of the same source share it.
      let module = this.modules.get(key);
      if (!module) {
        module = this.gpuDevice.createShaderModule({ code: build(), label: key });
        this.modules.set(key, module);
      }
      p = this.gpuDevice.createComputePipeline({ layout: 'auto', compute: { module, entryPoint }, label: cacheKey });
      this.pipelines.set(cacheKey, p);
      this.kernelOf.set(p, key.split('|')[0]);
      this.counters.pipelinesCompiled++;
    }
    return p;
  }

  dispatch(pipeline: GPUComputePipeline, params: ArrayBuffer | null, buffers: readonly GpuBuffer[], grid: readonly [number, number, number]): void {
    this.checkAlive();
    const entries: GPUBindGroupEntry[] = buffers.map((b, i) => ({ binding: i + (params ? 1 : 0), resource: { buffer: b.buffer } }));
    let uniform: GPUBuffer | undefined;
    if (params) {
      uniform = this.uniforms.acquire(Math.max(16, params.byteLength));
      this.gpuDevice.queue.writeBuffer(uniform, 0, params);
      entries.unshift({ binding: 0, resource: { buffer: uniform, size: Math.ceil(params.byteLength / 16) * 16 } });
    }
    const bindGroup = this.gpuDevice.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries });
    this.encoder ??= this.gpuDevice.createCommandEncoder();
    this.pass ??= this.encoder.beginComputePass();
    this.pass.setPipeline(pipeline);
    this.pass.setBindGroup(0, bindGroup);
    this.pass.dispatchWorkgroups(grid[0], grid[1], grid[2]);
    if (uniform) this.uniforms.release(uniform);
    this.counters.dispatches++;
    const kernel = this.kernelOf.get(pipeline) ?? 'other';
    this.counters.byKernel[kernel] = (this.counters.byKernel[kernel] ?? 0) + 1;
    if (++this.pending >= MAX_BATCH) this.flush();
  }

  /** Submits all queued work. */
  flush(): void {
    if (this.encoder) {
      this.pass?.end();
      this.gpuDevice.queue.submit([this.encoder.finish()]);
      this.counters.submits++;
    }
    this.encoder = undefined;
    this.pass = undefined;
    this.pending = 0;
    this.storage.onSubmit();
    this.uniforms.onSubmit();
    this.staging.onSubmit();
  }

  // ---- Backend ----
  upload(_dtype: DType, data: StorageArray): GpuBuffer {
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const out = this.alloc(Math.max(4, bytes.byteLength));
    const padded = bytes.byteLength % 4 === 0 ? bytes : copyPadded(bytes);
    if (padded.byteLength > 0) this.gpuDevice.queue.writeBuffer(out.buffer, 0, padded);
    return out;
  }

  allocBytes(dtype: DType, n: number): GpuBuffer {
    return this.alloc(wordBytes(n, lanesPerWord(dtype)));
  }

  writeBytes(handle: GpuBuffer, byteOffset: number, bytes: Uint8Array): void {
    if (byteOffset % 4 !== 0) throw new RangeError(`writeBytes: offset ${byteOffset} is not a multiple of 4`);
    const padded = bytes.byteLength % 4 === 0 ? bytes : copyPadded(bytes);
    if (padded.byteLength > 0) this.gpuDevice.queue.writeBuffer(handle.buffer, byteOffset, padded);
  }

  fill(dtype: DType, n: number, value: number): GpuBuffer {
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
    const n = numel(src.view.shape);
    const item = DTYPE_INFO[src.dtype].itemBytes;
    const start = src.view.offset * item;
    // Contiguous word-aligned views are copied straight out; anything else is compacted on the GPU first.
    const direct = isContiguous(src.view) && start % 4 === 0;
    const from = direct ? src.handle : castKernel(this, this.gpuOperand(src), src.dtype, false);
    const offset = direct ? start : 0;
    const size = Math.max(4, Math.ceil((n * item) / 4) * 4);
    const staging = this.staging.acquire(size);
    try {
      if (n > 0) {
        this.pass?.end();
        this.pass = undefined;
        this.encoder ??= this.gpuDevice.createCommandEncoder();
        this.encoder.copyBufferToBuffer(from.buffer, offset, staging, 0, size);
      }
      if (!direct) this.release(from);
      this.flush();
      this.counters.reads++;
      await staging.mapAsync(GPUMapMode.READ, 0, size);
      this.throwPendingErrors();
      const out = allocStorage(src.dtype, n);
      new Uint8Array(out.buffer).set(new Uint8Array(staging.getMappedRange(0, size), 0, n * item));
      staging.unmap();
      return out;
    } catch (err) {
      this.throwPendingErrors();
      throw err;
    } finally {
      this.staging.release(staging);
    }
  }

  cast(src: Operand<GpuBuffer>, outDtype: DType, saturate: boolean): GpuBuffer {
    return castKernel(this, this.gpuOperand(src), outDtype, saturate);
  }

  copyInto(src: Operand<GpuBuffer>, dst: Operand<GpuBuffer>): void {
    scatterKernel(this, this.gpuOperand(src), this.gpuOperand(dst));
  }

  indexSelect(x: Operand<GpuBuffer>, dim: number, index: Operand<GpuBuffer>): GpuBuffer {
    return this.withContiguous(x, (cx) => indexSelectKernel(this, cx, dim, this.gpuOperand(index)));
  }

  gather(x: Operand<GpuBuffer>, dim: number, index: Operand<GpuBuffer>): GpuBuffer {
    return gatherKernel(this, this.gpuOperand(x), dim, this.gpuOperand(index));
  }

  unary(op: UnaryOp, x: Operand<GpuBuffer>, outDtype: DType): GpuBuffer {
    return unaryKernel(this, op, this.gpuOperand(x), outDtype);
  }

  binary(op: BinaryOp, a: Operand<GpuBuffer>, b: Operand<GpuBuffer>, outShape: Shape, outDtype: DType): GpuBuffer {
    return binaryKernel(this, op, this.gpuOperand(a), this.gpuOperand(b), outShape, outDtype);
  }

  softmax(x: Operand<GpuBuffer>, dim: number, log: boolean): GpuBuffer {
    return this.withContiguous(x, (cx) => softmaxKernel(this, cx, dim, log));
  }

  sample(logits: Operand<GpuBuffer>, previous: Operand<GpuBuffer> | undefined, params: SamplingParams): GpuBuffer {
    const prev = previous && this.gpuOperand(previous);
    return this.withContiguous(logits, (row) => sampleKernel(this, row, prev, params));
  }

  quantizeBlocks(x: Operand<GpuBuffer>, q: QuantizeBlocks): [GpuBuffer, GpuBuffer] {
    return this.withContiguous(x, (cx) => quantizeBlocksKernel(this, cx, q));
  }

  rmsNorm(x: Operand<GpuBuffer>, weight: Operand<GpuBuffer> | undefined, eps: number): GpuBuffer {
    return rmsNormKernel(this, this.gpuOperand(x), weight && this.gpuOperand(weight), eps);
  }

  rope(x: Operand<GpuBuffer>, cos: Operand<GpuBuffer>, sin: Operand<GpuBuffer>, positionOffset: number): GpuBuffer {
    return ropeKernel(this, this.gpuOperand(x), this.gpuOperand(cos), this.gpuOperand(sin), positionOffset);
  }

  attention(q: Operand<GpuBuffer>, k: Operand<GpuBuffer>, v: Operand<GpuBuffer>, options: AttentionOptions): GpuBuffer {
    return attentionKernel(this, this.gpuOperand(q), this.gpuOperand(k), this.gpuOperand(v), options);
  }

  swiglu(x: Operand<GpuBuffer>): GpuBuffer {
    return swigluKernel(this, this.gpuOperand(x));
  }

  moeRoute(logits: Operand<GpuBuffer>, topK: number, normalize: boolean): [GpuBuffer, GpuBuffer] {
    return moeRouteKernel(this, this.gpuOperand(logits), topK, normalize);
  }

  expertLinear(x: Operand<GpuBuffer>, weight: Operand<GpuBuffer>, ids: Operand<GpuBuffer>, options: ExpertLinearOptions<GpuBuffer>): GpuBuffer {
    return expertLinearKernel(this, this.gpuOperand(x), this.gpuOperand(weight), this.gpuOperand(ids), {
      scale: options.scale,
      combine: options.combine && this.gpuOperand(options.combine),
      outDtype: options.outDtype,
    });
  }

  /** One dispatch: padding and previous frames are bounds checks in the kernel, strided views are read in place. */
  conv(x: Operand<GpuBuffer>, weight: Operand<GpuBuffer>, bias: Operand<GpuBuffer> | undefined, geometry: ConvGeometry, outShape: Shape, previous?: Operand<GpuBuffer>): GpuBuffer {
    return convKernel(this, this.gpuOperand(x), this.gpuOperand(weight), bias && this.gpuOperand(bias), geometry, outShape, previous && this.gpuOperand(previous));
  }

  pad(x: Operand<GpuBuffer>, before: readonly number[], outShape: Shape, mode: PadMode, value: number): GpuBuffer {
    return padKernel(this, this.gpuOperand(x), before, outShape, mode, value);
  }

  /** One dispatch (a workgroup per (n, group)); two when a packed output's groups are not whole words. */
  groupNorm(x: Operand<GpuBuffer>, numGroups: number, weight: Operand<GpuBuffer> | undefined, bias: Operand<GpuBuffer> | undefined, eps: number): GpuBuffer {
    return groupNormKernel(this, this.gpuOperand(x), numGroups, weight && this.gpuOperand(weight), bias && this.gpuOperand(bias), eps);
  }

  /** One dispatch; two when a packed output has an odd T*H*W. */
  channelRmsNorm(x: Operand<GpuBuffer>, weight: Operand<GpuBuffer> | undefined, eps: number, silu: boolean): GpuBuffer {
    return channelRmsNormKernel(this, this.gpuOperand(x), weight && this.gpuOperand(weight), eps, silu);
  }

  /** One dispatch, strided views read in place. */
  upsample2x(x: Operand<GpuBuffer>, mode: UpsampleMode): GpuBuffer {
    return upsample2xKernel(this, this.gpuOperand(x), mode);
  }

  reduce(op: ReduceOp, x: Operand<GpuBuffer>, dim: number, outDtype: DType): GpuBuffer {
    return this.withContiguous(x, (cx) => reduceKernel(this, op, cx, dim, outDtype));
  }

  /** GEMV for decode shapes (M <= 4, [N, K] weights), else the tiled GEMM; both dequantize FP8 on load. */
  matmul(a: Operand<GpuBuffer>, b: Operand<GpuBuffer>, dims: MatmulDims, outDtype: DType, scaling: MatmulScaling<GpuBuffer> = {}): GpuBuffer {
    const ga = this.gpuOperand(a);
    const gb = this.gpuOperand(b);
    const s: GemmScaling = {
      scaleA: scaling.scaleA && { buffer: scaling.scaleA.handle, recipe: scaling.scaleA.recipe },
      scaleB: scaling.scaleB && { buffer: scaling.scaleB.handle, recipe: scaling.scaleB.recipe },
      bias: scaling.bias && this.gpuOperand(scaling.bias),
      scaleResult: scaling.scaleResult,
    };
    return gemvApplies(gb, dims) ? gemvKernel(this, ga, gb, dims, outDtype, s) : gemmKernel(this, ga, gb, dims, outDtype, s);
  }

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
  }

  destroy(): void {
    if (this.released) return;
    this.released = true;
    this.encoder = undefined;
    this.pass = undefined;
    this.gpuDevice.destroy();
  }

  /** Runs a kernel that needs a contiguous view, compacting x into a temporary first when it is not. */
  private withContiguous<R>(x: Operand<GpuBuffer>, kernel: (x: GpuOperand) => R): R {
    return withContiguous(this, this.gpuOperand(x), kernel);
  }

  private gpuOperand(x: Operand<GpuBuffer>): GpuOperand {
    return { buffer: x.handle, dtype: x.dtype, view: x.view };
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
  const code = `enable subgroups;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) li: u32, @builtin(subgroup_invocation_id) lane: u32, @builtin(subgroup_size) size: u32) {
  let first = subgroupBroadcastFirst(li);
  out[li] = select(0u, 1u, lane == li % size && first == li - lane);
}`;
  const out = backend.alloc(256 * 4);
  try {
    backend.dispatch(backend.pipeline('subgroup-layout-probe', () => code), null, [out], [1, 1, 1]);
    const flags = (await backend.read({ handle: out, dtype: 'int32', view: contiguousView([256]) })) as Int32Array;
    return flags.every((f) => f === 1);
  } catch {
    return false;
  } finally {
    backend.release(out);
  }
}

function copyPadded(bytes: Uint8Array): Uint8Array {
  const out = new Uint8Array(Math.ceil(bytes.byteLength / 4) * 4);
  out.set(bytes);
  return out;
}
