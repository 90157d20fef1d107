import type { Backend, DeviceName, Operand } from '../runtime/backend.js';
import type { DType } from './dtype.js';
import { DisposedError, DTypeError } from './errors.js';
import { isFloating } from './dtype.js';
import type { GradNode } from '../autograd/node.js';
import { contiguousStrides, formatShape, isContiguous, numel, type Shape, type View } from './shape.js';
import { trackTensor } from './scope.js';
import { Storage } from './storage.js';
import type { ReduceOptions } from '../ops/reduce.js';
import type { CastOptions } from '../ops/convert.js';

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
  get T(): Tensor {
    return ops.transpose(this, -2, -1);
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
  add(other: TensorOrScalar): Tensor {
    return ops.add(this, other);
  }
  sub(other: TensorOrScalar): Tensor {
    return ops.sub(this, other);
  }
  mul(other: TensorOrScalar): Tensor {
    return ops.mul(this, other);
  }
  div(other: TensorOrScalar): Tensor {
    return ops.div(this, other);
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

  // ---- reductions ----
  sum(dim?: number, options?: ReduceOptions): Tensor {
    return ops.sum(this, dim, options);
  }
  mean(dim?: number, options?: ReduceOptions): Tensor {
    return ops.mean(this, dim, options);
  }
  max(dim?: number, options?: ReduceOptions): Tensor {
    return ops.max(this, dim, options);
  }
  min(dim?: number, options?: ReduceOptions): Tensor {
    return ops.min(this, dim, options);
  }
  argmax(dim?: number, options?: ReduceOptions): Tensor {
    return ops.argmax(this, dim, options);
  }
  argmin(dim?: number, options?: ReduceOptions): Tensor {
    return ops.argmin(this, dim, options);
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
