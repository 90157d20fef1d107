import type { Backend, DeviceName, Operand } from '../runtime/backend.js';
import type { DType } from './dtype.js';
import { DisposedError, DTypeError, ShapeError } from './errors.js';
import { isFloating } from './dtype.js';
import type { GradNode } from '../autograd/node.js';
import { contiguousStrides, formatShape, isContiguous, numel, type Shape, type View } from './shape.js';
import { trackTensor } from './scope.js';
import { Storage } from './storage.js';
import type { Dims, ReduceOptions } from '../ops/reduce.js';
import type { VarOptions } from '../ops/statistics.js';
import type { CastOptions } from '../ops/convert.js';
import type { CumsumOptions, SortOptions, SortResult, TopkOptions } from '../ops/scan-sort.js';

/**
 * The op functions and the backward pass Tensor's methods call. core imports nothing above it (data flows one way:
 * ops -> runtime -> core), so ops/tensor-methods.ts installs them when the ops are loaded; every tensor is made by
 * an op, so they are always there by the time a method runs.
 */
export interface TensorMethods {
  readonly ops: typeof import('../ops/index.js');
  backward(root: Tensor, grad?: Tensor): void;
}
type Ops = TensorMethods['ops'];
let pending: (() => TensorMethods) | undefined;
/** The methods, fetched on first use: a bundler may order a cycle's modules so the ops namespace is not yet filled when installTensorMethods runs. */
function resolveMethods(): TensorMethods {
  if (!pending) throw new Error('tensorgpu: a tensor method ran before the ops were loaded (import tensorgpu, not core/tensor alone)');
  const m = pending();
  ops = m.ops;
  runBackward = m.backward;
  return m;
}
// Until first use, any access resolves the methods; afterwards `ops` is the ops module itself (no indirection).
let ops: Ops = new Proxy({} as Ops, { get: (_target, name) => resolveMethods().ops[name as keyof Ops] });
let runBackward: TensorMethods['backward'] = (root, grad) => resolveMethods().backward(root, grad);
export function installTensorMethods(methods: () => TensorMethods): void {
  pending = methods;
}

export type Scalar = number;
export type TensorOrScalar = Tensor | Scalar;

/**
 * The frozen contiguous layout of each frozen shape array fromHandle was given. An eager op's result takes its
 * operand's shape array, so a chain of ops shares one layout (and one strides array) instead of making and freezing
 * both per result; a frozen array cannot change, so its entry cannot go stale.
 */
const contiguousLayouts = new WeakMap<Shape, View>();

/**
 * An n-dimensional array on one device. Ops are queued synchronously (GPU work is batched until a read);
 * reading values back is async (`toArray`). Views share storage; `dispose()` releases this tensor's hold on it.
 */
export class Tensor {
  readonly shape: Shape;
  readonly strides: readonly number[];
  /** Offset of the first element in the storage, in elements. */
  readonly offset: number;
  readonly dtype: DType;
  private storageRef: Storage | undefined;
  /** The gradient accumulated by backward() (a leaf that requires grad), or undefined. */
  grad: Tensor | undefined;
  /**
   * @internal Where backward writes this leaf's gradient instead of fresh storage: a view of a gradient arena that
   * parameters share (optim/flat-parameters.ts), so one optimizer dispatch updates all of them.
   */
  gradBuffer: Tensor | undefined;
  private wantsGrad = false;
  private node: GradNode | undefined;
  /** The view as one object (`layout`), made on first use unless the constructor was given a frozen one. */
  private cachedLayout: View | undefined;
  private cachedOperand: Operand<unknown> | undefined;

  constructor(storage: Storage, view: View, dtype: DType = storage.dtype) {
    // A frozen array is shared as it is (another tensor's shape, a view's, fromHandle's strides): nothing can
    // change it, and an eager op then copies no shape.
    this.shape = Object.isFrozen(view.shape) ? view.shape : Object.freeze([...view.shape]);
    this.strides = Object.isFrozen(view.strides) ? view.strides : Object.freeze([...view.strides]);
    this.offset = view.offset;
    // A frozen view of the arrays kept is this tensor's layout as it is (fromHandle's).
    if (Object.isFrozen(view) && view.shape === this.shape && view.strides === this.strides) this.cachedLayout = view;
    this.dtype = dtype;
    storage.retain();
    this.storageRef = storage;
    trackTensor(this);
  }

  /** A contiguous tensor owning fresh storage. */
  static fromHandle(backend: Backend, handle: unknown, dtype: DType, shape: Shape): Tensor {
    const storage = new Storage(backend, handle, dtype, numel(shape));
    let layout = contiguousLayouts.get(shape);
    if (layout === undefined) {
      const frozenShape = Object.isFrozen(shape) ? shape : Object.freeze([...shape]);
      layout = Object.freeze({ shape: frozenShape, strides: Object.freeze(contiguousStrides(shape)), offset: 0 });
      if (frozenShape === shape) contiguousLayouts.set(shape, layout);
    }
    return new Tensor(storage, layout);
  }

  get device(): DeviceName {
    return this.storage.device;
  }

  get ndim(): number {
    return this.shape.length;
  }

  get numel(): number {
    return numel(this.shape);
  }

  get isDisposed(): boolean {
    return this.storageRef === undefined;
  }

  get layout(): View {
    return (this.cachedLayout ??= { shape: this.shape, strides: this.strides, offset: this.offset });
  }

  /** The storage, checked for use after dispose and for a released device. */
  get storage(): Storage {
    const s = this.storageRef;
    if (!s) throw new DisposedError(`tensor ${this.describe()} was used after dispose()`);
    if ((s.backend as { released?: boolean }).released) {
      throw new DisposedError(`tensor ${this.describe()} lives on a WebGPU device that was released (releaseDevice())`);
    }
    return s;
  }

  /** What kernels read: storage handle + dtype + view (made once: none of the three changes). */
  operand(): Operand<unknown> {
    const storage = this.storage;
    return (this.cachedOperand ??= { handle: storage.handle, dtype: this.dtype, view: this.layout });
  }

  isContiguous(): boolean {
    return isContiguous(this.layout);
  }

  describe(): string {
    return `${formatShape(this.shape)} ${this.dtype}`;
  }

  toString(): string {
    return `Tensor(${this.describe()}, device=${this.storageRef ? this.storageRef.device : 'disposed'})`;
  }

  /** Releases this tensor's hold on its storage; the memory returns to the pool when no view holds it. Idempotent. */
  dispose(): void {
    const s = this.storageRef;
    this.storageRef = undefined;
    s?.release();
    // The gradient is this tensor's too; the graph behind a result stays with the tensors that saved it.
    this.grad?.dispose();
    this.grad = undefined;
    this.gradBuffer?.dispose();
    this.gradBuffer = undefined;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  // ---- autograd ----
  /** Whether gradients flow to this tensor: a leaf marked with requiresGrad_(), or the result of an op on one. */
  get requiresGrad(): boolean {
    return this.wantsGrad || this.node !== undefined;
  }

  /** The node of the op that made this tensor (undefined for leaves and for tensors made without grad). */
  get gradFn(): GradNode | undefined {
    return this.node;
  }

  /** Not made by a recorded op: gradients accumulate into its .grad. */
  get isLeaf(): boolean {
    return this.node === undefined;
  }

  /** Marks a leaf as requiring grad (torch's requires_grad_); floating dtypes only. Returns this. */
  requiresGrad_(flag = true): this {
    if (this.node)
      throw new DTypeError(`requiresGrad_ on ${this.describe()}: only leaves can change it (this tensor was made by ${this.node.name}); use detach() first`);
    if (flag && !isFloating(this.dtype)) throw new DTypeError(`only floating tensors can require grad, got ${this.describe()}`);
    this.wantsGrad = flag;
    return this;
  }

  /** @internal Called by the tape when a recorded op makes this tensor. */
  setGradFn(node: GradNode): void {
    this.node = node;
  }

  /** A view of the same storage outside the graph (no gradient flows through it). */
  detach(): Tensor {
    return new Tensor(this.storage, this.layout, this.dtype);
  }

  /** Computes gradients of this tensor with respect to the leaves that require grad (torch's backward). */
  backward(grad?: Tensor): void {
    runBackward(this, grad);
  }

  /** Drops the accumulated gradient (torch's `t.grad = None`). */
  zeroGrad(): void {
    this.grad?.dispose();
    this.grad = undefined;
  }

  // ---- data out ----
  /** Values as a typed array: Float32Array for every float dtype, Int32Array for int32, Uint8Array for uint8/bool. */
  toArray(): Promise<Float32Array | Int32Array | Uint8Array> {
    return ops.toArray(this);
  }
  /** Nested JS arrays (like torch.Tensor.tolist()). */
  tolist(): Promise<unknown> {
    return ops.tolist(this);
  }
  /** The single value of a one-element tensor. */
  item(): Promise<number> {
    return ops.item(this);
  }

  // ---- conversion ----
  /** Cast to a dtype (sync), or move to a device (async: reading from the GPU is async). */
  to(dtype: DType, options?: CastOptions): Tensor;
  to(device: DeviceName): Promise<Tensor>;
  to(target: DType | DeviceName, options?: CastOptions): Tensor | Promise<Tensor> {
    if (target === 'cpu' || target === 'webgpu') return ops.toDevice(this, target);
    return ops.cast(this, target, options);
  }
  contiguous(): Tensor {
    return ops.contiguous(this);
  }
  clone(): Tensor {
    return ops.clone(this);
  }

  // ---- views and shape ----
  reshape(...shape: number[] | [readonly number[]]): Tensor {
    return ops.reshape(this, flatArgs(shape));
  }
  view(...shape: number[] | [readonly number[]]): Tensor {
    return ops.view(this, flatArgs(shape));
  }
  permute(...dims: number[] | [readonly number[]]): Tensor {
    return ops.permute(this, flatArgs(dims));
  }
  transpose(dim0 = -2, dim1 = -1): Tensor {
    return ops.transpose(this, dim0, dim1);
  }
  /** All dims reversed (torch's `.T`: a 2-D transpose; torch deprecates it for other ranks but reverses them too). */
  get T(): Tensor {
    return this.ndim === 2
      ? ops.transpose(this, 0, 1)
      : ops.permute(
          this,
          this.shape.map((_, i) => this.ndim - 1 - i),
        );
  }
  /** The last two dims swapped (torch's `.mT`, a batch of matrices transposed); needs at least 2 dims. */
  get mT(): Tensor {
    if (this.ndim < 2) throw new ShapeError(`.mT needs at least 2 dims, got ${this.describe()}`);
    return ops.transpose(this, -2, -1);
  }
  /** The conjugate of `.mT` (torch's `.mH`): with no complex dtypes, `.mT`. */
  get mH(): Tensor {
    return this.mT;
  }
  narrow(dim: number, start: number, length: number): Tensor {
    return ops.narrow(this, dim, start, length);
  }
  slice(dim: number, start?: number, end?: number, step?: number): Tensor {
    return ops.slice(this, dim, start, end, step);
  }
  select(dim: number, index: number): Tensor {
    return ops.select(this, dim, index);
  }
  squeeze(dim?: number): Tensor {
    return ops.squeeze(this, dim);
  }
  unsqueeze(dim: number): Tensor {
    return ops.unsqueeze(this, dim);
  }
  expand(...shape: number[] | [readonly number[]]): Tensor {
    return ops.expand(this, flatArgs(shape));
  }
  flatten(startDim = 0, endDim = -1): Tensor {
    return ops.flatten(this, startDim, endDim);
  }

  // ---- elementwise ----
  add(other: TensorOrScalar, options?: { alpha?: number }): Tensor {
    return ops.add(this, other, options);
  }
  sub(other: TensorOrScalar, options?: { alpha?: number }): Tensor {
    return ops.sub(this, other, options);
  }
  mul(other: TensorOrScalar): Tensor {
    return ops.mul(this, other);
  }
  div(other: TensorOrScalar, options?: { roundingMode?: 'trunc' | 'floor' | null }): Tensor {
    return ops.div(this, other, options);
  }

  // ---- in place (torch's trailing underscore): write into this tensor's storage through its view, return this ----
  add_(other: TensorOrScalar, options?: { alpha?: number }): this {
    return ops.add_(this, other, options) as this;
  }
  sub_(other: TensorOrScalar, options?: { alpha?: number }): this {
    return ops.sub_(this, other, options) as this;
  }
  mul_(other: TensorOrScalar): this {
    return ops.mul_(this, other) as this;
  }
  div_(other: TensorOrScalar, options?: { roundingMode?: 'trunc' | 'floor' | null }): this {
    return ops.div_(this, other, options) as this;
  }
  pow_(exponent: TensorOrScalar): this {
    return ops.pow_(this, exponent) as this;
  }
  clamp_(min?: TensorOrScalar, max?: TensorOrScalar): this {
    return ops.clamp_(this, min, max) as this;
  }
  fill_(value: number): this {
    return ops.fill_(this, value) as this;
  }
  zero_(): this {
    return ops.zero_(this) as this;
  }
  copy_(src: Tensor): this {
    return ops.copy_(this, src) as this;
  }
  maximum(other: TensorOrScalar): Tensor {
    return ops.maximum(this, other);
  }
  /** this ** exponent (torch.pow). */
  pow(exponent: TensorOrScalar): Tensor {
    return ops.pow(this, exponent);
  }
  /** this where condition holds, else other (torch.Tensor.where). */
  where(condition: Tensor, other: TensorOrScalar): Tensor {
    return ops.where(condition, this, other);
  }
  minimum(other: TensorOrScalar): Tensor {
    return ops.minimum(this, other);
  }
  eq(other: TensorOrScalar): Tensor {
    return ops.eq(this, other);
  }
  ne(other: TensorOrScalar): Tensor {
    return ops.ne(this, other);
  }
  lt(other: TensorOrScalar): Tensor {
    return ops.lt(this, other);
  }
  le(other: TensorOrScalar): Tensor {
    return ops.le(this, other);
  }
  gt(other: TensorOrScalar): Tensor {
    return ops.gt(this, other);
  }
  ge(other: TensorOrScalar): Tensor {
    return ops.ge(this, other);
  }
  neg(): Tensor {
    return ops.neg(this);
  }
  abs(): Tensor {
    return ops.abs(this);
  }
  exp(): Tensor {
    return ops.exp(this);
  }
  log(): Tensor {
    return ops.log(this);
  }
  sqrt(): Tensor {
    return ops.sqrt(this);
  }
  rsqrt(): Tensor {
    return ops.rsqrt(this);
  }
  silu(): Tensor {
    return ops.silu(this);
  }
  gelu(options?: { approximate?: 'none' | 'tanh' }): Tensor {
    return ops.gelu(this, options);
  }
  tanh(): Tensor {
    return ops.tanh(this);
  }
  sigmoid(): Tensor {
    return ops.sigmoid(this);
  }
  relu(): Tensor {
    return ops.relu(this);
  }
  sin(): Tensor {
    return ops.sin(this);
  }
  cos(): Tensor {
    return ops.cos(this);
  }
  erf(): Tensor {
    return ops.erf(this);
  }
  floor(): Tensor {
    return ops.floor(this);
  }
  ceil(): Tensor {
    return ops.ceil(this);
  }
  /** Half to even, as torch.round. */
  round(): Tensor {
    return ops.round(this);
  }
  sign(): Tensor {
    return ops.sign(this);
  }
  reciprocal(): Tensor {
    return ops.reciprocal(this);
  }
  clamp(min?: TensorOrScalar, max?: TensorOrScalar): Tensor {
    return ops.clamp(this, min, max);
  }
  remainder(other: TensorOrScalar): Tensor {
    return ops.remainder(this, other);
  }
  fmod(other: TensorOrScalar): Tensor {
    return ops.fmod(this, other);
  }
  floorDivide(other: TensorOrScalar): Tensor {
    return ops.floorDivide(this, other);
  }
  logicalAnd(other: Tensor): Tensor {
    return ops.logicalAnd(this, other);
  }
  logicalOr(other: Tensor): Tensor {
    return ops.logicalOr(this, other);
  }
  logicalXor(other: Tensor): Tensor {
    return ops.logicalXor(this, other);
  }
  logicalNot(): Tensor {
    return ops.logicalNot(this);
  }
  prod(dim?: Dims, options?: ReduceOptions): Tensor {
    return ops.prod(this, dim, options);
  }
  /** torch.Tensor.var (correction defaults to 1). */
  var(dim?: Dims, options?: VarOptions): Tensor {
    return ops.variance(this, dim, options);
  }
  std(dim?: Dims, options?: VarOptions): Tensor {
    return ops.std(this, dim, options);
  }
  logsumexp(dim?: Dims, options?: ReduceOptions): Tensor {
    return ops.logsumexp(this, dim, options);
  }
  any(dim?: Dims, options?: ReduceOptions): Tensor {
    return ops.any(this, dim, options);
  }
  all(dim?: Dims, options?: ReduceOptions): Tensor {
    return ops.all(this, dim, options);
  }
  /** The tensor tiled repeats[i] times along dim i (torch.Tensor.repeat). */
  repeat(...repeats: number[] | [readonly number[]]): Tensor {
    return ops.repeat(this, flatArgs(repeats));
  }
  flip(...dims: number[] | [readonly number[]]): Tensor {
    return ops.flip(this, flatArgs(dims));
  }
  split(sizeOrSections: number | readonly number[], dim = 0): Tensor[] {
    return ops.split(this, sizeOrSections, dim);
  }
  chunk(chunks: number, dim = 0): Tensor[] {
    return ops.chunk(this, chunks, dim);
  }
  tril(diagonal = 0): Tensor {
    return ops.tril(this, diagonal);
  }
  triu(diagonal = 0): Tensor {
    return ops.triu(this, diagonal);
  }
  maskedFill(mask: Tensor, value: number | Tensor): Tensor {
    return ops.maskedFill(this, mask, value);
  }
  scatter(dim: number, index: Tensor, src: Tensor | number): Tensor {
    return ops.scatter(this, dim, index, src);
  }
  scatterAdd(dim: number, index: Tensor, src: Tensor): Tensor {
    return ops.scatterAdd(this, dim, index, src);
  }

  // ---- reductions ----
  sum(dim?: Dims, options?: ReduceOptions): Tensor {
    return ops.sum(this, dim, options);
  }
  mean(dim?: Dims, options?: ReduceOptions): Tensor {
    return ops.mean(this, dim, options);
  }
  max(dim?: Dims, options?: ReduceOptions): Tensor {
    return ops.max(this, dim, options);
  }
  min(dim?: Dims, options?: ReduceOptions): Tensor {
    return ops.min(this, dim, options);
  }
  argmax(dim?: number, options?: ReduceOptions): Tensor {
    return ops.argmax(this, dim, options);
  }
  argmin(dim?: number, options?: ReduceOptions): Tensor {
    return ops.argmin(this, dim, options);
  }

  cumsum(dim: number, options?: CumsumOptions): Tensor {
    return ops.cumsum(this, dim, options);
  }
  sort(options?: SortOptions): SortResult {
    return ops.sort(this, options);
  }
  topk(k: number, options?: TopkOptions): SortResult {
    return ops.topk(this, k, options);
  }

  indexSelect(dim: number, index: Tensor): Tensor {
    return ops.indexSelect(this, dim, index);
  }
  gather(dim: number, index: Tensor): Tensor {
    return ops.gather(this, dim, index);
  }

  softmax(dim = -1): Tensor {
    return ops.softmax(this, dim);
  }
  logSoftmax(dim = -1): Tensor {
    return ops.logSoftmax(this, dim);
  }

  // ---- linear algebra ----
  matmul(other: Tensor): Tensor {
    return ops.matmul(this, other);
  }
  /** This [..., K] through a dense layer with weight [N, K] (and bias [N]). */
  linear(weight: Tensor, bias?: Tensor): Tensor {
    return ops.linear(this, weight, bias);
  }
}

function flatArgs(args: number[] | [readonly number[]]): number[] {
  return Array.isArray(args[0]) ? [...(args[0] as readonly number[])] : (args as number[]);
}
