// The optimizer base: one parameter group, per-parameter state (a step count and float32 tensors shaped like the
// parameter, created on the parameter's first step), step() over the parameters that have a gradient, and the
// state dict. Each update is one fused backend call (Backend.adamStep / sgdStep): on the GPU, one dispatch per
// parameter per step, the state written in place and never filled first.
import type { Backend } from '../runtime/backend.js';
import { DeviceMismatchError, DTypeError, ShapeError, TensorGpuError } from '../core/errors.js';
import { keep } from '../core/scope.js';
import { contiguousStrides, formatShape } from '../core/shape.js';
import { flatSpan, gradsInSpan, type FlatSpan } from './flat-parameters.js';
import { copyInto } from '../ops/shape-ops.js';
import { tensor } from '../ops/creation.js';
import { writeTensor } from '../ops/capture.js';
import { Tensor } from '../core/tensor.js';
import { unreplayable } from '../compile/trace.js';

/** A hyperparameter value as the state dict keeps it. */
export type HyperValue = number | boolean | readonly number[];

/** One parameter's state: its step count and its state tensors by PyTorch's names (exp_avg, momentum_buffer, ...). */
export interface ParamState {
  readonly step: number;
  readonly tensors: Readonly<Record<string, Tensor>>;
}

/**
 * What `Optimizer.stateDict()` returns and `loadStateDict()` takes (torch's optimizer.state_dict(), one group):
 * the optimizer's name, its hyperparameters (lr included) and, per parameter in the optimizer's order, its state
 * or null before its first step. The tensors are the optimizer's own (updated in place by later steps): save them
 * (saveOptimizerState) or clone them before stepping again.
 */
export interface OptimizerStateDict {
  readonly optimizer: string;
  readonly hyper: Readonly<Record<string, HyperValue>>;
  readonly state: readonly (ParamState | null)[];
}

/** Options every optimizer takes. */
export interface CommonOptimizerOptions {
  /**
   * Keep a float32 master copy of each float16/bfloat16 parameter and update that (mixed-precision training): small
   * steps that would round away in 16 bits accumulate. Costs 4 bytes per parameter value. Default false.
   */
  masterWeights?: boolean;
  /**
   * torch's capturable=True: the step count (and the bias corrections made from it) and the learning rate live in
   * device tensors that each step advances / reads on the device, so a recorded step (capture(), compile()) replays
   * with the right update at every step. Setting `lr` (a scheduler) then writes the device lr. Each state takes one
   * more dispatch per step (its counter). The counters and lr are uploaded when made: take one eager step before
   * recording. Replays advance only the device counters: stateDict()'s step counts the eager steps. Default false.
   */
  capturable?: boolean;
}

const MASTER = 'master_weight';

/** The float dtypes a parameter may have (the state stays float32 whatever it is). */
const PARAM_DTYPES = ['float32', 'float16', 'bfloat16'];

interface MutableState {
  step: number;
  readonly tensors: Map<string, Tensor>;
  /** Capturable: the device step counter float32 [t, 1 - beta1^t, 1 - beta2^t] of this state. */
  counter?: Tensor;
}

export abstract class Optimizer<H extends { lr: number } = { lr: number }> {
  readonly params: readonly Tensor[];
  /** The hyperparameters, one group for every parameter (torch's param_groups[0]). */
  protected readonly hyper: H;
  private readonly states: (MutableState | undefined)[];
  /** Parameters that tile one arena (flat-parameters.ts): updated as one span, one dispatch per step. */
  private readonly flat: FlatSpan | undefined;
  /** The span's state (per-parameter states then hold views of it). */
  private flatState: MutableState | undefined;

  /** float16/bfloat16 parameters step on a float32 master copy (state 'master_weight'), then take its rounding. */
  readonly masterWeights: boolean;
  /** Step counts and lr on the device (CommonOptimizerOptions.capturable). */
  readonly capturable: boolean;
  /** Capturable: the lr as a float32 [1] on the parameters' device. */
  private lrTensor: Tensor | undefined;

  protected constructor(
    /** The class name saved in the state dict ('SGD', 'Adam', 'AdamW'). */
    readonly name: string,
    params: readonly Tensor[],
    hyper: H,
    common: CommonOptimizerOptions = {},
  ) {
    this.masterWeights = common.masterWeights ?? false;
    this.capturable = common.capturable ?? false;
    if (params.length === 0) throw new RangeError(`${name}: got an empty parameter list`);
    const seen = new Set<Tensor>();
    params.forEach((p, i) => {
      if (seen.has(p)) throw new TensorGpuError(`${name}: parameter ${i} (${p.describe()}) appears twice in the parameter list`);
      seen.add(p);
      if (!PARAM_DTYPES.includes(p.dtype)) throw new DTypeError(`${name}: parameter ${i} is ${p.describe()}; parameters must be ${PARAM_DTYPES.join(', ')}`);
      if (!p.isLeaf)
        throw new TensorGpuError(
          `${name}: parameter ${i} (${p.describe()}) is not a leaf (it was made by ${p.gradFn?.name}): optimize the tensor it came from`,
        );
      if (!p.isContiguous())
        throw new ShapeError(`${name}: parameter ${i} (${p.describe()}) is a strided view; the update writes parameters in place, so they must be contiguous`);
    });
    this.params = [...params];
    this.hyper = { ...hyper };
    this.validate(this.hyper);
    this.states = params.map(() => undefined);
    this.flat = flatSpan(this.params);
    if (this.capturable) {
      const backend = params[0].storage.backend;
      const other = params.findIndex((p) => p.storage.backend !== backend);
      if (other >= 0)
        throw new DeviceMismatchError(`${name}: capturable needs every parameter on one device; parameter ${other} is on ${params[other].device}`);
      this.lrTensor = keep(tensor(Float32Array.of(this.hyper.lr), { device: params[0].device }));
    }
  }

  /** Capturable: the device lr the update kernels read (float32 [1]); undefined otherwise. */
  protected get deviceLr(): Tensor | undefined {
    return this.lrTensor;
  }

  /** Whether the parameters share one arena and step as one span (multi-tensor apply: one dispatch per step). */
  get fused(): boolean {
    return this.flat !== undefined;
  }

  /** The learning rate (a scheduler or the caller sets it between steps). */
  get lr(): number {
    return this.hyper.lr;
  }

  set lr(value: number) {
    if (!(value >= 0)) throw new RangeError(`${this.name}: invalid learning rate ${value}`);
    this.hyper.lr = value;
    if (this.lrTensor) writeTensor(this.lrTensor, [value]);
  }

  /** Checks hyperparameters as torch's constructor does (RangeError naming the value). */
  protected abstract validate(h: H): void;

  /** Updates param in place from grad (checked: same device, shape and a float dtype): one backend call. */
  protected abstract update(backend: Backend, param: Tensor, grad: Tensor, state: ParamStateAccess): void;

  /** Updates every parameter that has a gradient (the others, as in PyTorch, keep their values and state). */
  step(): void {
    // Its step count and lr are host numbers baked into the update: a replay would repeat this step's.
    if (!this.capturable) unreplayable(`${this.name}'s step count and learning rate are host numbers: create it with capturable: true to compile its step`);
    // Every gradient is checked before any parameter changes, so a bad one leaves the step undone, not half done.
    const work = this.params.flatMap((p, i) => (p.grad ? [{ p, g: p.grad, i }] : []));
    for (const { p, g, i } of work) {
      if (g.storage.backend !== p.storage.backend)
        throw new DeviceMismatchError(`${this.name}: parameter ${i} (${p.describe()}) is on ${p.device} but its gradient on ${g.device}`);
      if (g.shape.length !== p.shape.length || g.shape.some((s, d) => s !== p.shape[d])) {
        throw new ShapeError(`${this.name}: parameter ${i} is ${formatShape(p.shape)} but its gradient ${formatShape(g.shape)}`);
      }
      if (!PARAM_DTYPES.includes(g.dtype)) throw new DTypeError(`${this.name}: the gradient of parameter ${i} is ${g.describe()}; expected a float dtype`);
    }
    if (this.canStepFlat()) {
      this.stepFlat(this.flat!);
      return;
    }
    this.unflatten();
    for (const { p, g, i } of work) {
      const backend = p.storage.backend;
      let state = this.states[i];
      if (!state) this.states[i] = state = { step: 0, tensors: new Map() };
      const s = state;
      // A gradient in the parameter's own storage cannot be bound beside it (a kernel writes the parameter).
      const grad = g.storage === p.storage ? g.clone() : g;
      // Master weights: the update runs on the float32 copy, which the 16-bit parameter then takes, rounded.
      const master = this.masterWeights && p.dtype !== 'float32' ? (s.tensors.get(MASTER) ?? this.createMaster(s, p)) : undefined;
      try {
        this.update(backend, master ?? p, grad, {
          step: s.step,
          counter: (init) => (s.counter ??= counterTensor(p, init(s.step))),
          tensor: (key) => s.tensors.get(key),
          create: (key) => {
            const t = keep(Tensor.fromHandle(backend, backend.allocBytes('float32', p.numel), 'float32', p.shape));
            s.tensors.set(key, t);
            return t;
          },
        });
        if (master) copyInto(p, master);
      } finally {
        if (grad !== g) grad.dispose();
      }
      s.step++;
      // Autograd refuses a saved tensor written since it was saved.
      p.storage.version++;
    }
  }

  /**
   * The span path applies when every parameter has its gradient in its arena slot and the state is the span's
   * (or not made yet); a loaded state dict (per-parameter copies) or a missing gradient takes the per-tensor path.
   */
  private canStepFlat(): boolean {
    const flat = this.flat;
    if (!flat || !gradsInSpan(this.params, flat)) return false;
    return this.flatState !== undefined || this.states.every((s) => s === undefined);
  }

  /**
   * Gives every parameter its own copy of the span's state (the per-tensor kernels bind whole state buffers), for
   * good: the per-tensor path from then on.
   */
  private unflatten(): void {
    if (!this.flatState) return;
    const counter = this.flatState.counter;
    this.states.forEach((s) => {
      for (const [key, view] of s!.tensors) {
        s!.tensors.set(key, keep(view.clone()));
        view.dispose();
      }
      // The span's device count (replays advance it, not the host's) goes on in each parameter's.
      if (counter) s!.counter = keep(counter.clone());
    });
    counter?.dispose();
    for (const t of this.flatState.tensors.values()) t.dispose();
    this.flatState = undefined;
  }

  private stepFlat(flat: FlatSpan): void {
    const backend = flat.params.storage.backend;
    const total = flat.params.numel;
    if (!this.flatState) {
      this.flatState = { step: 0, tensors: new Map() };
      this.params.forEach((_, i) => (this.states[i] = { step: 0, tensors: new Map() }));
    }
    const fs = this.flatState;
    this.update(backend, flat.params, flat.grads, {
      step: fs.step,
      counter: (init) => (fs.counter ??= counterTensor(flat.params, init(fs.step))),
      tensor: (key) => fs.tensors.get(key),
      create: (key) => {
        const t = keep(Tensor.fromHandle(backend, backend.allocBytes('float32', total), 'float32', [total]));
        fs.tensors.set(key, t);
        // Each parameter's state is a view of the span's, so stateDict() lists it per parameter as usual.
        this.params.forEach((p, i) =>
          this.states[i]!.tensors.set(
            key,
            keep(new Tensor(t.storage, { shape: p.shape, strides: contiguousStrides(p.shape), offset: flat.offsets[i] }, 'float32')),
          ),
        );
        return t;
      },
    });
    fs.step++;
    for (const s of this.states) s!.step++;
    flat.params.storage.version++;
  }

  private createMaster(s: MutableState, p: Tensor): Tensor {
    const t = keep(p.to('float32'));
    s.tensors.set(MASTER, t);
    return t;
  }

  /** Drops every parameter's gradient (torch's zero_grad(set_to_none=True)). */
  zeroGrad(): void {
    for (const p of this.params) p.zeroGrad();
  }

  /** Hyperparameters, step counts and state tensors (the optimizer's own: see OptimizerStateDict). */
  stateDict(): OptimizerStateDict {
    return {
      optimizer: this.name,
      hyper: { ...this.hyper } as Record<string, HyperValue>,
      state: this.states.map((s) => (s ? { step: s.step, tensors: Object.fromEntries(s.tensors) } : null)),
    };
  }

  /**
   * Replaces hyperparameters and state with copies of sd's (on each parameter's device). sd must come from the
   * same optimizer class over parameters of the same shapes, in the same order.
   */
  loadStateDict(sd: OptimizerStateDict): void {
    if (sd.optimizer !== this.name) throw new TensorGpuError(`${this.name}.loadStateDict: the state dict is of ${sd.optimizer}`);
    if (sd.state.length !== this.params.length)
      throw new TensorGpuError(`${this.name}.loadStateDict: the state dict has ${sd.state.length} parameters, this optimizer ${this.params.length}`);
    const hyper = { ...this.hyper } as Record<string, HyperValue>;
    for (const [k, v] of Object.entries(sd.hyper)) {
      if (!(k in hyper)) throw new TensorGpuError(`${this.name}.loadStateDict: unknown hyperparameter '${k}'`);
      if (typeof v !== typeof hyper[k] || Array.isArray(v) !== Array.isArray(hyper[k]))
        throw new TensorGpuError(
          `${this.name}.loadStateDict: hyperparameter '${k}' is ${JSON.stringify(v)}, expected a value like ${JSON.stringify(hyper[k])}`,
        );
      hyper[k] = Array.isArray(v) ? [...v] : v;
    }
    this.validate(hyper as unknown as H);
    sd.state.forEach((s, i) => {
      if (!s) return;
      // State exists from a parameter's first step on (step 0 is null).
      if (!Number.isInteger(s.step) || s.step < 1) throw new RangeError(`${this.name}.loadStateDict: parameter ${i} has step ${s.step}`);
      for (const [key, t] of Object.entries(s.tensors)) {
        const p = this.params[i];
        if (t.shape.join() !== p.shape.join())
          throw new ShapeError(
            `${this.name}.loadStateDict: state '${key}' of parameter ${i} is ${formatShape(t.shape)}, the parameter ${formatShape(p.shape)}`,
          );
        if (t.dtype !== 'float32')
          throw new DTypeError(`${this.name}.loadStateDict: state '${key}' of parameter ${i} is ${t.describe()}; optimizer state is float32`);
      }
    });
    // Copies first: sd may hold this optimizer's own tensors (opt.loadStateDict(opt.stateDict())).
    const copies = sd.state.map((s, i) => {
      if (!s) return undefined;
      const p = this.params[i];
      const tensors = new Map<string, Tensor>();
      for (const [key, t] of Object.entries(s.tensors)) tensors.set(key, keep(copyTo(t, p)));
      return { step: s.step, tensors };
    });
    this.disposeState();
    copies.forEach((c, i) => (this.states[i] = c));
    Object.assign(this.hyper, hyper);
  }

  /** Releases the state tensors (the parameters stay the caller's). */
  dispose(): void {
    this.disposeState();
    this.lrTensor?.dispose();
    this.lrTensor = undefined;
    this.flat?.params.dispose();
    this.flat?.grads.dispose();
  }

  private disposeState(): void {
    for (const t of this.flatState?.tensors.values() ?? []) t.dispose();
    this.flatState?.counter?.dispose();
    this.flatState = undefined;
    this.states.forEach((s, i) => {
      for (const t of s?.tensors.values() ?? []) t.dispose();
      s?.counter?.dispose();
      this.states[i] = undefined;
    });
  }
}

/** What update() sees of a parameter's state: the step count before this step, and its tensors by name. */
export interface ParamStateAccess {
  /** Steps taken before this one (0: the first; new state tensors then hold nothing and are read as zeros). */
  readonly step: number;
  /**
   * Capturable: this state's device step counter, float32 [t, 1 - beta1^t, 1 - beta2^t] for the t steps taken (the
   * host's count when it is made; from then on the device's), made from init(steps taken) on first use.
   */
  counter(init: (steps: number) => readonly number[]): Tensor;
  tensor(key: string): Tensor | undefined;
  /** A new float32 tensor shaped like the parameter, uninitialized (the kernel's first step writes it whole). */
  create(key: string): Tensor;
}

/** A capturable state's counter on p's device, uploaded once. */
function counterTensor(p: Tensor, values: readonly number[]): Tensor {
  return keep(tensor(Float32Array.from(values), { device: p.device }));
}

/** A contiguous copy of t with its own storage on p's device. */
function copyTo(t: Tensor, p: Tensor): Tensor {
  if (t.storage.backend !== p.storage.backend)
    throw new DeviceMismatchError(`loadStateDict: a state tensor is on ${t.device}, its parameter on ${p.device}; load it with { device: '${p.device}' }`);
  return t.clone();
}
