// Runs a program (plan.ts) with its traced handles mapped to live ones: the inputs of this call, fresh buffers for
// what its steps make, and the traced buffers themselves for everything else (weights, caches). On the CPU this is
// every call; on WebGPU it runs once inside a recording, and later calls replay what was recorded.
import { runKernel } from '../kernels/registry.js';
import type { Backend } from '../runtime/backend.js';
import type { Program, ProgramStep } from './plan.js';
import { isHandle } from './trace.js';

/** v with every traced handle that env maps replaced (arrays and plain objects are copied, the rest kept). */
function remap(v: unknown, env: ReadonlyMap<object, object>, depth = 0): unknown {
  if (v === null || typeof v !== 'object') return v;
  const mapped = env.get(v);
  if (mapped) return mapped;
  if (depth > 6 || ArrayBuffer.isView(v)) return v;
  if (Array.isArray(v)) return v.map((x) => remap(x, env, depth + 1));
  if (Object.getPrototypeOf(v) !== Object.prototype) return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) out[k] = remap(x, env, depth + 1);
  return out;
}

/** Pairs what a step returned with what it returned when traced, and maps the traced handles to the new ones. */
function bind(backend: Backend, traced: unknown, actual: unknown, env: Map<object, object>, depth = 0): void {
  if (isHandle(backend, traced)) {
    if (actual !== null && typeof actual === 'object') env.set(traced, actual);
    return;
  }
  if (depth > 6 || traced === null || typeof traced !== 'object' || actual === null || typeof actual !== 'object') return;
  if (Array.isArray(traced)) traced.forEach((t, k) => bind(backend, t, (actual as unknown[])[k], env, depth + 1));
  else if (Object.getPrototypeOf(traced) === Object.prototype)
    for (const [k, t] of Object.entries(traced)) bind(backend, t, (actual as Record<string, unknown>)[k], env, depth + 1);
}

function backendOf(step: ProgramStep): Backend {
  return step.kind === 'call' ? step.call.backend : step.group.backend;
}

export function runStep(step: ProgramStep, env: Map<object, object>): void {
  const backend = backendOf(step);
  if (step.kind === 'call') {
    const c = step.call;
    const args = c.args.map((a) => remap(a, env));
    const out =
      c.method === 'kernel'
        ? runKernel(c.name!, backend, args[0] as never)
        : (backend as unknown as Record<string, (...a: unknown[]) => unknown>)[c.method](...args);
    bind(backend, c.out, out, env);
  } else {
    const g = step.group;
    const inputs = g.args.inputs.map((x) => ({ ...x, handle: env.get(x.handle) ?? x.handle }));
    if (g.reducedFirst) {
      const { x, ...reduce } = g.reducedFirst;
      const out = runKernel('reduceMap', backend, { x: { ...x, handle: env.get(x.handle) ?? x.handle }, ...reduce, chain: { ...g.args, inputs } });
      env.set(g.outs[0], out as object);
    } else if (g.reduce) {
      const { out, ...reduce } = g.reduce;
      env.set(out, runKernel('fusedReduce', backend, { chain: { ...g.args, inputs }, ...reduce }) as object);
    } else {
      const outs = runKernel('fusedMap', backend, { ...g.args, inputs }) as object[];
      g.outs.forEach((h, k) => env.set(h, outs[k]));
    }
  }
  for (const h of step.frees) {
    const live = env.get(h);
    if (live) backend.free(live);
    env.delete(h);
  }
}

/** Runs steps from `from` on; on a throw, the index of the step that threw is in the error's `step`. */
export function runProgram(program: Program, env: Map<object, object>, from = 0): void {
  for (let k = from; k < program.steps.length; k++) {
    try {
      runStep(program.steps[k], env);
    } catch (e) {
      throw Object.assign(e as object, { step: k });
    }
  }
}
