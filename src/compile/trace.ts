// Tracing: a function runs once, eagerly and for real, while every op it queues is written down: each op-table
// kernel (runKernel) and each Backend primitive it calls directly (the elementwise map, cast, copyInto, fill), with
// its operands and what it returned. Work an op does inside (a kernel running another op, a launcher's temporaries)
// is not written down: replaying the op repeats it. What a replay could not repeat (a read back to the host, host
// data uploaded or written) marks the trace unsupported, with the reason, while the function still runs to the end.
import type { Backend } from '../runtime/backend.js';
import { observeKernels, type OpName } from '../kernels/registry.js';

export type PrimitiveMethod = 'unary' | 'binary' | 'where' | 'cast' | 'copyInto' | 'fill' | 'allocBytes';
const RECORDED: readonly PrimitiveMethod[] = ['unary', 'binary', 'where', 'cast', 'copyInto', 'fill', 'allocBytes'];

/** One op the function ran, as it was called. */
export interface TracedCall {
  readonly backend: Backend;
  /** A Backend method, or 'kernel' for an op-table kernel (`name`). */
  readonly method: PrimitiveMethod | 'kernel';
  readonly name?: OpName;
  /** The method's arguments (a kernel's: its one args object). */
  readonly args: readonly unknown[];
  /** What it returned: a handle, handles inside arrays or objects, or nothing (copyInto). */
  readonly out: unknown;
}

/** Whether v is a storage handle of backend: a GPU buffer record, or a CPU typed array. */
export function isHandle(backend: Backend, v: unknown): v is object {
  if (v === null || typeof v !== 'object') return false;
  if (backend.device === 'cpu') return ArrayBuffer.isView(v);
  return 'buffer' in v && 'size' in v && !ArrayBuffer.isView(v);
}

/** Calls fn(handle) for every handle of backend inside v (arrays and plain objects are searched). */
export function forEachHandle(backend: Backend, v: unknown, fn: (h: object) => void, depth = 0): void {
  if (isHandle(backend, v)) fn(v);
  else if (depth > 6 || v === null || typeof v !== 'object' || ArrayBuffer.isView(v)) return;
  else if (Array.isArray(v)) for (const x of v) forEachHandle(backend, x, fn, depth + 1);
  else if (Object.getPrototypeOf(v) === Object.prototype) for (const x of Object.values(v)) forEachHandle(backend, x, fn, depth + 1);
}

export interface Trace {
  readonly calls: TracedCall[];
  /** Handles released while tracing (dead when the function returned, unless also an output). */
  readonly freed: Set<object>;
  /** Why a replay could not repeat this function, when it could not (the first reason met). */
  unsupported?: string;
  /** Dispatches the eager run issued on the GPU. */
  eagerDispatches: number;
  /**
   * Tensors the function made from host data and kept (state made on first use: an optimizer's counters): replays
   * find them where the trace left them. Host data it released again was per-call input, which keeps it eager.
   */
  readonly hostState: Set<object>;
  /** Tensors made inside traceConstant while tracing. */
  readonly constants: Set<object>;
  /**
   * Those the function released: the release is held back, since the program reads them at every call (the
   * compiled function frees them when it drops the trace).
   */
  readonly retained: Set<object>;
}

let tracing = 0;
let current: Trace | undefined;
let constants = 0;

/**
 * Runs make(), whose tensors come from host data that depends only on what the traced call depends on (a window, a
 * filterbank: values computed from options): a trace keeps them as constants instead of staying eager.
 */
export function traceConstant<T>(make: () => T): T {
  constants++;
  try {
    return make();
  } finally {
    constants--;
  }
}

/**
 * Called by library code that bakes a host value which changes from call to call into the kernels it queues (a
 * sampler's random draw, an optimizer's step count): a trace taken meanwhile is not replayed, for this reason.
 */
export function unreplayable(reason: string): void {
  if (current) current.unsupported ??= reason;
}

/** Whether a trace is being taken (a compiled function called inside another's trace runs eagerly, so it is traced too). */
export function isTracing(): boolean {
  return tracing > 0;
}

/** Runs fn with recording on for the given backends; the trace is complete when fn (and its scope) returned. */
export function traceCalls<T>(backends: readonly Backend[], fn: () => T): { result: T; trace: Trace } {
  tracing++;
  const trace: Trace = { calls: [], freed: new Set(), eagerDispatches: 0, hostState: new Set(), constants: new Set(), retained: new Set() };
  const outer = current;
  current = trace;
  let depth = 0;
  const unsupported = (why: string) => {
    trace.unsupported ??= why;
  };
  const restore: (() => void)[] = [];
  for (const backend of backends) {
    const b = backend as unknown as Record<string, (...a: unknown[]) => unknown>;
    const wrapMethod = (method: string, wrapper: (original: (...a: unknown[]) => unknown) => (...a: unknown[]) => unknown) => {
      const original = b[method];
      b[method] = wrapper((...a) => original.apply(backend, a));
      restore.push(() => delete b[method]);
    };
    for (const method of RECORDED) {
      wrapMethod(method, (original) => (...a) => {
        if (depth > 0) return original(...a);
        depth++;
        try {
          const out = original(...a);
          trace.calls.push({ backend, method, args: a, out });
          return out;
        } finally {
          depth--;
        }
      });
    }
    wrapMethod('free', (original) => (...a) => {
      const h = a[0] as object;
      if (trace.constants.has(h)) {
        trace.retained.add(h);
        return;
      }
      trace.freed.add(h);
      return original(...a);
    });
    wrapMethod('read', (original) => (...a) => {
      unsupported('it reads tensor values back to the host (toArray, item, ...): a replay cannot repeat that');
      return original(...a);
    });
    wrapMethod('upload', (original) => (...a) => {
      const out = original(...a);
      if (depth === 0) (constants === 0 ? trace.hostState : trace.constants).add(out as object);
      return out;
    });
    wrapMethod('writeBytes', (original) => (...a) => {
      if (depth === 0) unsupported('it writes host data into a tensor (writeTensor, ...): a replay would not repeat the write');
      return original(...a);
    });
  }
  const previous = observeKernels((name, backend, args, run) => {
    if (depth > 0) return run();
    depth++;
    try {
      const out = run();
      trace.calls.push({ backend, method: 'kernel', name, args: [args], out });
      return out;
    } finally {
      depth--;
    }
  });
  try {
    const result = fn();
    if (result instanceof Promise) {
      trace.unsupported = 'it is async: a compiled function queues its work synchronously';
    }
    for (const h of trace.hostState) {
      if (trace.freed.has(h)) unsupported('it creates a tensor from host data (tensor(), rand(), ...): pass it in as an argument');
    }
    return { result, trace };
  } finally {
    tracing--;
    current = outer;
    observeKernels(previous);
    for (const r of restore.reverse()) r();
  }
}
