// compile(fn) / jit(fn): torch.compile and jax.jit for tensorgpu. Per input signature (shapes, dtypes, strides,
// devices, which inputs require grad, the other arguments' values), the first call runs fn eagerly while tracing the
// ops it queues (trace.ts); the program built from the trace fuses runs of elementwise ops and plans intermediates
// by lifetime (plan.ts). On WebGPU the second call runs that program inside a recording and every later call replays
// the recording with this call's input and fresh output buffers bound in place of the recorded ones: no op code,
// no allocation but the outputs, one encode per dispatch. On the CPU every later call runs the program through the
// reference kernels. What a replay could not repeat (a host read, host data, a host random draw) keeps that
// signature eager, with the reason in explain().
import type { DType } from '../core/dtype.js';
import { contiguousView, formatShape, type View } from '../core/shape.js';
import { tidy } from '../core/scope.js';
import { Storage } from '../core/storage.js';
import { Tensor } from '../core/tensor.js';
import { backwardSweeps, gradients } from '../autograd/backward.js';
import { enableGrad, isGradEnabled } from '../autograd/grad-mode.js';
import { record } from '../autograd/node.js';
import type { Backend } from '../runtime/backend.js';
import { backendFor, webgpuBackend } from '../runtime/registry.js';
import type { CapturedStep } from '../runtime/webgpu/capture.js';
import type { GpuBuffer } from '../runtime/webgpu/gpu-context.js';
import type { WebGpuBackend } from '../runtime/webgpu/webgpu-backend.js';
import { regionGraph, releaseGraph } from './grad-region.js';
import { buildProgram, describeGroup, type Program } from './plan.js';
import { runProgram } from './run-program.js';
import { forEachHandle, isHandle, isTracing, traceCalls } from './trace.js';

export interface CompileOptions {
  /** Signatures kept at once (default 8); the least recently used is dropped (and traced again if it returns). */
  maxSignatures?: number;
  /** Names the recordings (profiles, errors). */
  label?: string;
}

/** Where one signature stands. */
export interface SignatureStats {
  readonly signature: string;
  /** 'traced': the next call records; 'recorded' (WebGPU): calls replay; 'program' (CPU): calls run the program; 'eager'. */
  readonly mode: 'traced' | 'recorded' | 'program' | 'eager';
  /** Why this signature runs eagerly. */
  readonly reason?: string;
  readonly calls: number;
  /** Ops the trace recorded, and GPU dispatches the eager (traced) call issued. */
  readonly tracedOps: number;
  readonly eagerDispatches: number;
  /** Steps of the program, and dispatches of its recording (WebGPU). */
  readonly programSteps: number;
  readonly dispatches?: number;
  readonly fusedGroups: readonly string[];
  /** Bytes the program's elementwise ops move one by one, and fused. */
  readonly elementwiseBytes: { readonly unfused: number; readonly fused: number };
  /** Bytes moved per replay, where kernels report it. */
  readonly replayBytes?: number;
  /** Buffers the recording binds and their bytes (intermediates share buffers by lifetime). */
  readonly recordedBuffers?: { readonly count: number; readonly bytes: number };
  readonly deadOps: number;
  /** Ops folded into a matmul's epilogue (bias and residual adds, activations). */
  readonly epilogues: number;
  /** Values fn keeps alive without returning them (written back after each run). */
  readonly escapees: number;
}

export interface CompiledFunction<A extends unknown[], R> {
  (...args: A): R;
  /** One paragraph per signature: ops, dispatches, fused groups, bytes, fallbacks. */
  explain(): string;
  stats(): { signatures: SignatureStats[]; traces: number; evictions: number };
  /** Drops every trace and recording (closed-over tensors that were replaced are read again on the next call). */
  reset(): void;
}

/** An output of the traced call: where its values are, and how to give them back. */
interface OutputSlot {
  readonly handle: object;
  readonly backend: Backend;
  readonly dtype: DType;
  readonly view: View;
  /** Elements of the storage the output lived in. */
  readonly length: number;
  /** Whether fn made it (else it is an input's or a closed-over tensor's storage, and is copied). */
  readonly made: boolean;
}

interface Entry {
  readonly signature: string;
  reason?: string;
  calls: number;
  program?: Program;
  tracedOps: number;
  eagerDispatches: number;
  /** Traced storage handles of the tensor inputs, in argument order. */
  inputs: object[];
  outputs: OutputSlot[];
  /** The result with tensors replaced by { output: k }. */
  template: unknown;
  /** WebGPU: held buffers until recorded, the recording, the buffers it binds for inputs and outputs. */
  releaseHold?: () => void;
  step?: CapturedStep;
  /** The WebGPU device the trace ran on (a program is only good for it). */
  gpu?: WebGpuBackend;
  /**
   * The trace made state fn keeps (an optimizer's moments on its first step): the next call traces again, since
   * from then on fn finds that state and runs differently (torch.compile's warm-up runs, for the same reason).
   */
  warmup?: boolean;
  /** Traces taken for this signature. */
  traces: number;
  /** Trace constants fn released, kept for the program (freed when the entry is dropped), with their backend. */
  retained: { handle: object; backend: Backend }[];
  boundInputs?: GpuBuffer[];
  boundOutputs?: GpuBuffer[];
  /** A forward whose output needs gradients: what its compiled backward needs. */
  region?: Region;
}

/**
 * A compiled forward whose output requires grad, as torch.compile's AOT autograd splits it: the forward program
 * also returns the tensors its backward reads, and the output gets one node whose rule is the backward, compiled
 * too: (gradient, saved tensors, the call's tensors) -> the gradients of the inputs that require grad and of the
 * closed-over leaves (weights) the forward reached.
 */
interface Region {
  /** The output slot that requires grad. */
  readonly root: number;
  /** Output slots of the saved tensors the forward made (the program's extra outputs). */
  readonly saved: readonly number[];
  /** Positions, among the call's tensors, of the inputs that require grad. */
  readonly gradInputs: readonly number[];
  /** Closed-over leaves the gradient reaches. */
  readonly leaves: readonly Tensor[];
  readonly backward: CompiledFunction<Tensor[], (Tensor | undefined)[]>;
  /** The eager graph of the call whose backward runs now, for the backward's trace to sweep. */
  pending?: Pending;
  /** The args of the call whose backward runs now (with the node's saved views): a recompute reads them. */
  args?: unknown[];
  /** Whether a backward ran: until then each call traces again, since only a traced call leaves a graph to sweep. */
  backwardRan: boolean;
}

/** A traced call's own graph: its output's node (on a disposed stand-in that holds no storage) and what to differentiate by. */
interface Pending {
  readonly root: Tensor;
  readonly wrt: readonly Tensor[];
}

/** A disposed tensor carrying t's node: what a sweep reads of a root (node, shape, dtype), holding no storage. */
function standIn(t: Tensor): Tensor {
  const s = t.detach();
  s.setGradFn(t.gradFn!);
  s.dispose();
  return s;
}

const OUTPUT = Symbol('output');
type OutputRef = { readonly [OUTPUT]: number };

/** Tensors inside args, in order, and the signature: everything a trace depends on. */
function signatureOf(args: readonly unknown[]): { tensors: Tensor[]; signature: string } {
  const tensors: Tensor[] = [];
  const handles = new Map<unknown, number>();
  const walk = (v: unknown, depth: number): string => {
    if (v instanceof Tensor) {
      const handle = v.storage.handle;
      const alias = handles.get(handle);
      if (alias === undefined) handles.set(handle, tensors.length);
      tensors.push(v);
      const grad = v.requiresGrad ? ' grad' : '';
      return `T(${v.device} ${v.dtype} ${formatShape(v.shape)} ${v.strides.join(',')}+${v.offset}${grad}${alias === undefined ? '' : ` =${alias}`})`;
    }
    if (v === null || typeof v !== 'object') return typeof v === 'function' ? `f:${v.name}` : (JSON.stringify(v) ?? 'undefined');
    if (depth > 6) return '...';
    if (Array.isArray(v)) return `[${v.map((x) => walk(x, depth + 1)).join(',')}]`;
    if (Object.getPrototypeOf(v) === Object.prototype) return `{${Object.entries(v).map(([k, x]) => `${k}:${walk(x, depth + 1)}`)}}`;
    return `O:${identity(v)}`;
  };
  const signature = `${isGradEnabled() ? 'grad ' : ''}${args.map((a) => walk(a, 0)).join(', ')}`;
  return { tensors, signature };
}

/** args with each tensor replaced by f(tensor, k), k counting tensors in signatureOf's order. */
function mapTensors(v: unknown, f: (t: Tensor, k: number) => Tensor): unknown {
  let k = 0;
  const walk = (x: unknown, depth: number): unknown => {
    if (x instanceof Tensor) return f(x, k++);
    if (x === null || typeof x !== 'object' || depth > 6) return x;
    if (Array.isArray(x)) return x.map((y) => walk(y, depth + 1));
    if (Object.getPrototypeOf(x) === Object.prototype) return Object.fromEntries(Object.entries(x).map(([key, y]) => [key, walk(y, depth + 1)]));
    return x;
  };
  return walk(v, 0);
}

const ids = new WeakMap<object, number>();
let nextId = 1;
function identity(v: object): number {
  let id = ids.get(v);
  if (id === undefined) ids.set(v, (id = nextId++));
  return id;
}

function describeError(e: unknown): string {
  return ((e as Error)?.message ?? String(e)).split('\n')[0];
}

/**
 * Compiles fn, a function of tensors (and other arguments, which become part of the signature) returning tensors
 * (alone, in arrays or plain objects). fn runs in a scope (as tidy): tensors it makes and does not return are
 * disposed unless kept with keep(). Closed-over tensors (weights, caches) are read where they live at each call;
 * reset() after replacing one by a new tensor (or changing which of them require grad). Returned tensors are new
 * at each call. A function whose one output needs gradients (a model's forward with trainable weights or inputs)
 * gets a compiled backward too; a function that runs its own backward() is compiled whole (a training step).
 */
export function compile<A extends unknown[], R>(fn: (...args: A) => R, options: CompileOptions = {}): CompiledFunction<A, R> {
  const maxSignatures = Math.max(1, options.maxSignatures ?? 8);
  const label = options.label ?? (fn.name || 'compiled');
  const entries = new Map<string, Entry>();
  let traces = 0;
  let evictions = 0;

  type Built = { result: R; made: Tensor[] };

  /** A planned or replayed call's result; a region's output gets its backward's node, which keeps the saved tensors. */
  const finish = (entry: Entry, tensors: Tensor[], args: A, { result, made }: Built): R => {
    const region = entry.region;
    if (!region) return result;
    const saved = region.saved.map((k) => made[k]);
    attach(region, made[region.root], tensors, saved, args);
    for (const t of saved) t.dispose();
    return result;
  };

  const drop = (e: Entry) => {
    e.region?.backward.reset();
    e.releaseHold?.();
    e.step?.dispose();
    for (const { handle, backend } of e.retained.splice(0)) if (!(backend as { released?: boolean }).released) backend.free(handle);
  };

  /**
   * Gives out (the region's output of one call) the node whose rule runs the compiled backward on this call's saved
   * tensors and inputs; pending is the call's own graph where it has one (a traced call).
   */
  const attach = (region: Region, out: Tensor, tensors: readonly Tensor[], saved: readonly Tensor[], args: A, pending?: Pending) => {
    const wrt = [...region.gradInputs.map((k) => tensors[k]), ...region.leaves];
    record(out, `compiled ${label}`, wrt, [...saved, ...tensors], (g, views) => {
      region.pending = pending;
      region.args = mapTensors(args, (_, k) => views[saved.length + k]) as unknown[];
      try {
        return region.backward(g.isContiguous() && g.offset === 0 ? g : g.contiguous(), ...views);
      } finally {
        region.backwardRan = true;
        region.args = undefined;
        // A graph the backward did not sweep (its recording replayed instead) still holds what it saved.
        if (region.pending) releaseGraph(region.pending.root, region.pending.wrt);
        region.pending = undefined;
      }
    });
  };

  /**
   * The region's backward, as compile() traces it: the first time, the sweep of the traced call's own graph; where
   * no graph is left (a backward traced again, or one that runs eagerly), the forward runs again with grad and its
   * graph is swept (as a checkpoint does).
   */
  const backwardOf =
    (regionOf: () => Region) =>
    (g: Tensor, ..._savedAndInputs: Tensor[]): (Tensor | undefined)[] => {
      const region = regionOf();
      const pending = region.pending;
      region.pending = undefined;
      if (pending) return gradients(pending.root, pending.wrt, g);
      const args = region.args;
      if (!args) throw new Error(`compiled ${label}: its backward ran outside a backward() sweep`);
      return enableGrad(() => {
        const leaves = new Map<number, Tensor>();
        const again = mapTensors(args, (t, k) => {
          if (!region.gradInputs.includes(k)) return t;
          const leaf = t.detach().requiresGrad_();
          leaves.set(k, leaf);
          return leaf;
        }) as A;
        let root: Tensor | undefined;
        mapTensors(fn(...again), (t) => {
          if (t.requiresGrad) root ??= t;
          return t;
        });
        if (!root) throw new Error(`compiled ${label}: run again for its backward, no output needs gradients`);
        return gradients(root, [...region.gradInputs.map((k) => leaves.get(k)!), ...region.leaves], g);
      });
    };

  const trace = (signature: string, tensors: Tensor[], args: A, previous = 0): { entry: Entry; result: R } => {
    traces++;
    const backends = [backendFor('cpu'), ...(webgpuBackend() ? [webgpuBackend() as Backend] : [])];
    const gpu = webgpuBackend();
    const dispatches0 = gpu?.counters.dispatches ?? 0;
    const sweeps0 = backwardSweeps();
    // An async function's tensors outlive its first await, so no scope can hold them: it only runs eagerly.
    const isAsync = fn.constructor?.name === 'AsyncFunction';
    const { result, trace } = traceCalls(backends, () => (isAsync ? fn(...args) : tidy(() => fn(...args))));
    const entry: Entry = {
      signature,
      calls: 1,
      tracedOps: trace.calls.length,
      eagerDispatches: (gpu?.counters.dispatches ?? 0) - dispatches0,
      inputs: tensors.map((t) => t.storage.handle as object),
      gpu,
      retained: [],
      traces: previous + 1,
      outputs: [],
      template: undefined,
    };
    entry.reason = trace.unsupported;
    const owner = new Map<object, Backend>();
    for (const c of trace.calls) forEachHandle(c.backend, c.args, (h) => owner.set(h, c.backend));
    for (const h of trace.retained) {
      const backend = owner.get(h);
      if (backend) entry.retained.push({ handle: h, backend });
      // A constant no traced op read: nothing needs it, so its release goes ahead.
      else (gpu && isHandle(gpu, h) ? gpu : backendFor('cpu')).free(h);
    }
    const outputs: OutputSlot[] = [];
    const slotOf = new Map<Tensor, number>();
    const gradSlots: [Tensor, number][] = [];
    const produced = new Set<object>();
    for (const c of trace.calls) forEachHandle(c.backend, c.out, (h) => produced.add(h));
    const inputs = new Set(entry.inputs);
    let needsGrad = false;
    const walk = (v: unknown, depth: number): unknown => {
      if (v instanceof Tensor) {
        needsGrad ||= v.requiresGrad;
        let k = slotOf.get(v);
        if (k === undefined) {
          const s = v.storage;
          const handle = s.handle as object;
          outputs.push({ handle, backend: s.backend, dtype: v.dtype, view: v.layout, length: s.length, made: produced.has(handle) && !inputs.has(handle) });
          slotOf.set(v, (k = outputs.length - 1));
          if (v.requiresGrad) gradSlots.push([v, k]);
        }
        return { [OUTPUT]: k } satisfies OutputRef;
      }
      if (v === null || typeof v !== 'object' || depth > 6) return v;
      if (Array.isArray(v)) return v.map((x) => walk(x, depth + 1));
      if (Object.getPrototypeOf(v) === Object.prototype) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x, depth + 1)]));
      entry.reason ??= `it returns a ${(v as object).constructor?.name ?? 'non-plain'} object: return tensors, arrays or plain objects`;
      return v;
    };
    entry.template = walk(result, 0);
    entry.outputs = outputs;
    if (outputs.some((o) => trace.hostState.has(o.handle)))
      entry.reason ??= 'it returns a tensor made from host data (tensor(), rand(), ...): pass it in as an argument';
    let region: { root: Tensor; slot: number; gradInputs: number[]; leaves: readonly Tensor[]; saved: Map<object, { slot: number; t: Tensor }> } | undefined;
    if (needsGrad && backwardSweeps() === sweeps0) {
      const [root, rootSlot] = gradSlots[0];
      if (gradSlots.length > 1)
        entry.reason ??=
          'more than one of its outputs needs gradients: return one, or compile the whole training step (forward, backward() and the optimizer step)';
      else if (!root.gradFn || !outputs[rootSlot].made) entry.reason ??= 'it returns an input that requires grad as it is: nothing to compile';
      else if (!entry.reason) {
        // The forward program also returns the tensors the backward reads that the forward made (one slot per storage).
        const gradInputs = tensors.flatMap((t, k) => (t.requiresGrad ? [k] : []));
        const graph = regionGraph(
          root,
          gradInputs.map((k) => tensors[k]),
        );
        const saved = new Map<object, { slot: number; t: Tensor }>();
        for (const t of graph.saved) {
          const st = t.storage;
          const h = st.handle as object;
          if (!produced.has(h) || inputs.has(h) || trace.hostState.has(h) || saved.has(h)) continue;
          outputs.push({ handle: h, backend: st.backend, dtype: t.dtype, view: t.layout, length: st.length, made: true });
          saved.set(h, { slot: outputs.length - 1, t });
        }
        region = { root, slot: rootSlot, gradInputs, leaves: graph.leaves, saved };
      }
    }
    if (!entry.reason) {
      try {
        entry.program = buildProgram(trace, new Set(outputs.map((o) => o.handle)));
      } catch (e) {
        entry.reason = `it could not be planned: ${describeError(e)}`;
      }
    }
    if (region && !entry.reason) {
      // This call's output keeps its graph for the backward's trace to sweep, behind the node every call's output gets.
      const saved = [...region.saved.values()];
      const r: Region = {
        root: region.slot,
        saved: saved.map((x) => x.slot),
        gradInputs: region.gradInputs,
        leaves: region.leaves,
        backwardRan: false,
        backward: compile(
          backwardOf(() => r),
          { label: `${label} backward`, maxSignatures: 2 },
        ),
      };
      entry.region = r;
      const pending = { root: standIn(region.root), wrt: [...region.gradInputs.map((k) => tensors[k]), ...region.leaves] };
      attach(
        r,
        region.root,
        tensors,
        saved.map((x) => x.t),
        args,
        pending,
      );
    }
    // State made by this call (kept, not returned): the first trace is a warm-up, the next call traces again.
    const madeState = trace.hostState.size > 0 || (entry.program?.escapees.length ?? 0) > 0;
    if (!entry.reason && madeState && entry.traces === 1) entry.warmup = true;
    // An eager signature (or a warm-up) runs fn itself: the constants its trace kept are not needed.
    if (entry.reason || entry.warmup) drop(entry);
    if (!entry.reason && !entry.warmup && gpu && entry.program) {
      // Hold every buffer the program reads until it is recorded: a tensor released meanwhile must not be reused.
      const buffers: GPUBuffer[] = [];
      for (const c of trace.calls)
        if (c.backend === (gpu as Backend)) forEachHandle(gpu, c.args, (h) => !produced.has(h) && buffers.push((h as GpuBuffer).buffer));
      for (const e of entry.program.escapees) if (e.backend === (gpu as Backend)) buffers.push((e.handle as GpuBuffer).buffer);
      entry.releaseHold = gpu.hold(buffers);
    }
    return { entry, result };
  };

  /** Runs the program (CPU), or records it (WebGPU's first run after the trace). */
  const runPlanned = (entry: Entry, tensors: Tensor[]): Built => {
    const program = entry.program!;
    const env = new Map<object, object>();
    entry.inputs.forEach((h, k) => env.set(h, tensors[k].storage.handle as object));
    const gpu = webgpuBackend();
    const onGpu = gpu && program.steps.some((s) => (s.kind === 'call' ? s.call.backend : s.group.backend) === (gpu as Backend));
    if (!onGpu || !gpu) {
      runProgram(program, env);
      writeBack(program, env);
      return build(entry, (k) => env.get(entry.outputs[k].handle));
    }
    gpu.beginCapture(label);
    let recording = true;
    try {
      runProgram(program, env);
      writeBack(program, env);
    } catch (e) {
      gpu.abortCapture();
      recording = false;
      entry.reason = `recording failed: ${describeError(e)}`;
      const from = (e as { step?: number }).step;
      if (from === undefined) throw e;
      runProgram(program, env, from);
      writeBack(program, env);
    }
    if (recording) {
      entry.step = gpu.endCapture();
      entry.boundInputs = tensors.map((t) => t.storage.handle as GpuBuffer);
      entry.boundOutputs = entry.outputs.map((o) => (o.made ? (env.get(o.handle) as GpuBuffer) : undefined)) as GpuBuffer[];
    }
    entry.releaseHold?.();
    entry.releaseHold = undefined;
    return build(entry, (k) => env.get(entry.outputs[k].handle));
  };

  const replay = (entry: Entry, tensors: Tensor[]): Built => {
    const gpu = webgpuBackend() as WebGpuBackend;
    const substitute = new Map<GPUBuffer, GpuBuffer>();
    const scratch: { copy: GpuBuffer; now: GpuBuffer }[] = [];
    entry.boundInputs!.forEach((bound, k) => {
      const now = tensors[k].storage.handle as GpuBuffer;
      if (now.buffer === bound.buffer) return;
      if (now.size >= bound.size) substitute.set(bound.buffer, now);
      else {
        // A smaller buffer than the recorded one (another pool size class): copied into one of the recorded size.
        const copy = gpu.alloc(bound.size);
        const words = contiguousView([now.size / 4]);
        gpu.copyInto({ handle: now, dtype: 'int32', view: words }, { handle: copy, dtype: 'int32', view: words });
        substitute.set(bound.buffer, copy);
        scratch.push({ copy, now });
      }
    });
    // One new buffer per recorded output buffer (outputs that are views of one storage share it).
    const fresh = entry.boundOutputs!.map((b) => {
      if (!b) return undefined;
      let out = substitute.get(b.buffer);
      if (!out) substitute.set(b.buffer, (out = gpu.alloc(b.size)));
      return out;
    });
    gpu.replay(entry.step!, substitute);
    // What the program wrote into such an input (a cache's rows) goes back where the caller holds it.
    for (const { copy, now } of scratch) {
      const words = contiguousView([now.size / 4]);
      gpu.copyInto({ handle: copy, dtype: 'int32', view: words }, { handle: now, dtype: 'int32', view: words });
      gpu.release(copy);
    }
    return build(
      entry,
      (k) =>
        fresh[k] ??
        (entry.inputs.includes(entry.outputs[k].handle) ? (tensors[entry.inputs.indexOf(entry.outputs[k].handle)].storage.handle as object) : undefined),
    );
  };

  /** The result: outputs whose storage the run made are wrapped; those it did not make (an input, a weight) are copied. */
  const build = (entry: Entry, storageOf: (k: number) => object | undefined): Built => {
    const storages = new Map<object, Storage>();
    const made = entry.outputs.map((o, k) => {
      const handle = storageOf(k);
      if (o.made && handle) {
        let s = storages.get(handle);
        if (!s) storages.set(handle, (s = new Storage(o.backend, handle, o.dtype, o.length)));
        return new Tensor(s, o.view, o.dtype);
      }
      const copy = o.backend.cast({ handle: handle ?? o.handle, dtype: o.dtype, view: o.view }, o.dtype, false);
      return Tensor.fromHandle(o.backend, copy, o.dtype, o.view.shape);
    });
    const fill = (v: unknown, depth: number): unknown => {
      if (v === null || typeof v !== 'object' || depth > 6) return v;
      if (OUTPUT in v) return made[(v as OutputRef)[OUTPUT]];
      if (Array.isArray(v)) return v.map((x) => fill(x, depth + 1));
      if (Object.getPrototypeOf(v) === Object.prototype) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, fill(x, depth + 1)]));
      return v;
    };
    return { result: fill(entry.template, 0) as R, made };
  };

  const compiled = ((...args: A): R => {
    if (isTracing()) return fn(...args);
    const { tensors, signature } = signatureOf(args);
    let entry = entries.get(signature);
    // A program holds the device's buffers and pipelines: after releaseDevice() and initDevice() it traces again.
    if (entry?.gpu && entry.gpu !== webgpuBackend()) {
      entries.delete(signature);
      drop(entry);
      entry = undefined;
    }
    // A region whose backward never ran yet traces each call (only a traced call leaves the graph its backward's
    // trace sweeps); one whose weights stopped requiring grad traces again.
    if (entry?.region && (!entry.region.backwardRan || entry.region.leaves.some((l) => !l.requiresGrad))) {
      entries.delete(signature);
      drop(entry);
      const { entry: e, result } = trace(signature, tensors, args, entry.traces);
      e.calls = entry.calls + 1;
      entries.set(signature, e);
      return result;
    }
    if (entry?.warmup) {
      entries.delete(signature);
      const { entry: e, result } = trace(signature, tensors, args, entry.traces);
      e.calls = entry.calls + 1;
      entries.set(signature, e);
      return result;
    }
    if (!entry) {
      const { entry: e, result } = trace(signature, tensors, args);
      entries.set(signature, e);
      if (entries.size > maxSignatures) {
        const [oldest, old] = entries.entries().next().value as [string, Entry];
        entries.delete(oldest);
        drop(old);
        evictions++;
      }
      return result;
    }
    // Most recently used last, so the first entry is the one to drop.
    entries.delete(signature);
    entries.set(signature, entry);
    entry.calls++;
    if (entry.reason && !entry.step) return fn.constructor?.name === 'AsyncFunction' ? fn(...args) : tidy(() => fn(...args));
    return finish(entry, tensors, args, entry.step ? replay(entry, tensors) : runPlanned(entry, tensors));
  }) as CompiledFunction<A, R>;

  compiled.stats = () => ({ signatures: [...entries.values()].map(statsOf), traces, evictions });
  compiled.explain = () => {
    const s = compiled.stats();
    const lines = [`compiled ${label}: ${s.signatures.length} signature(s), ${s.traces} trace(s), ${s.evictions} dropped`];
    const regions = [...entries.values()].map((e) => e.region);
    for (const [i, e] of s.signatures.entries()) {
      lines.push(`- (${e.signature}): ${e.mode}, ${e.calls} call(s)${e.reason ? `; eager because ${e.reason}` : ''}`);
      lines.push(
        `  traced ${e.tracedOps} ops (${e.eagerDispatches} dispatches eager) -> ${e.programSteps} steps` +
          (e.dispatches !== undefined ? `, ${e.dispatches} dispatches per replay` : '') +
          (e.replayBytes ? `, ${e.replayBytes} bytes per replay` : '') +
          (e.recordedBuffers ? `, ${e.recordedBuffers.count} buffers bound (${e.recordedBuffers.bytes} bytes)` : '') +
          `; ${e.epilogues} ops (adds, activations) folded into matmul epilogues; ${e.deadOps} dead ops dropped; ${e.escapees} kept values written back`,
      );
      if (e.fusedGroups.length)
        lines.push(`  elementwise bytes ${e.elementwiseBytes.unfused} one by one -> ${e.elementwiseBytes.fused} fused`, ...e.fusedGroups.map((g) => `  ${g}`));
      const region = regions[i];
      if (region) {
        lines.push(`  its output needs gradients: the forward also returns ${region.saved.length} saved tensor(s) for its backward`);
        lines.push(
          ...region.backward
            .explain()
            .split('\n')
            .map((l) => `    ${l}`),
        );
      }
    }
    return lines.join('\n');
  };
  compiled.reset = () => {
    for (const e of entries.values()) drop(e);
    entries.clear();
  };
  return compiled;
}

/** compile() under jax's name. */
export const jit = compile;

function statsOf(e: Entry): SignatureStats {
  const groups = e.program?.steps.flatMap((s) => (s.kind === 'fused' ? [s.group] : [])) ?? [];
  const mode = e.step ? 'recorded' : e.reason ? 'eager' : e.calls > 1 ? 'program' : 'traced';
  return {
    signature: e.signature,
    mode,
    reason: e.reason,
    calls: e.calls,
    tracedOps: e.tracedOps,
    eagerDispatches: e.eagerDispatches,
    programSteps: e.program?.steps.length ?? 0,
    dispatches: e.step?.dispatches.length,
    fusedGroups: groups.map(describeGroup),
    elementwiseBytes: { unfused: groups.reduce((s, g) => s + g.bytesUnfused, 0), fused: groups.reduce((s, g) => s + g.bytesFused, 0) },
    replayBytes: e.step?.dispatches.reduce((s, d) => s + (d.bytes ?? 0), 0),
    recordedBuffers: e.step && { count: e.step.buffers.size, bytes: [...e.step.buffers].reduce((s, b) => s + b.size, 0) },
    deadOps: e.program?.deadCalls ?? 0,
    epilogues: e.program?.epilogues ?? 0,
    escapees: e.program?.escapees.length ?? 0,
  };
}

/** Values fn keeps alive without returning them live in their traced storage: each run copies its own there. */
function writeBack(program: Program, env: Map<object, object>): void {
  for (const { handle, backend } of program.escapees) {
    const live = env.get(handle);
    if (!live || live === handle) continue;
    if (backend.device === 'cpu') {
      (handle as Uint8Array).set(live as Uint8Array);
      continue;
    }
    const words = contiguousView([Math.min((live as GpuBuffer).size, (handle as GpuBuffer).size) / 4]);
    backend.copyInto({ handle: live, dtype: 'int32', view: words }, { handle, dtype: 'int32', view: words });
    backend.free(live);
    env.set(handle, handle);
  }
}
