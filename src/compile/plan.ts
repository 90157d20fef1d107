// From a trace to the program a replay runs: dead elementwise work dropped, runs of consecutive elementwise ops fused
// into one fusedMap kernel each, and every intermediate released right after its last use, so that inside a
// recording its buffer serves later allocations (the buffers are planned by lifetime).
//
// A run is only fused over consecutive ops: nothing else runs between them, so no in-place write can change a value
// the fused kernel keeps in registers. A value leaves the registers (the kernel writes it out) when anything outside
// the run reads it, when the function returns it or when it outlives the function; a run is cut where an op reads a
// value of the run through a view other than the plain one (a broadcast, a transpose), since that would read another
// invocation's element.
import { DTYPE_INFO, type DType } from '../core/dtype.js';
import { formatShape, isContiguous, numel, type Shape, type View } from '../core/shape.js';
import type { MatmulArgs } from '../kernels/matmul/index.js';
import type { ReduceArgs } from '../kernels/reduce/index.js';
import {
  FUSED_MAP_MAX_BUFFERS,
  FUSED_MAP_MAX_SCALARS,
  errorFlagBindings,
  type FusedMapArgs,
  type FusedNode,
  type FusedRef,
} from '../kernels/fused-map/index.js';
import { EPILOGUE_UNARY_OPS, isScalarOperand, type Backend, type EpilogueUnary, type Operand, type ReduceOp, type ScalarOperand } from '../runtime/backend.js';
import { forEachHandle, type Trace, type TracedCall } from './trace.js';

export interface FusedGroup {
  readonly backend: Backend;
  readonly args: FusedMapArgs<object>;
  /** The reduction its one output feeds, run in the same kernel (fusedReduce); its result is `out`. */
  readonly reduce?: { readonly op: ReduceOp; readonly dim: number; readonly outDtype: DType; readonly out: object };
  /** The reduction that feeds it, run first in the same kernel (reduceMap): its result is the chain's last input. */
  readonly reducedFirst?: { readonly x: Operand<object>; readonly op: ReduceOp; readonly dim: number; readonly outDtype: DType };
  /** The traced handles its outputs stand for, in args.outputs order. */
  readonly outs: readonly object[];
  /** The traced calls it replaces. */
  readonly calls: readonly TracedCall[];
  /** Bytes the calls one by one read and wrote, and bytes the fused kernel does. */
  readonly bytesUnfused: number;
  readonly bytesFused: number;
}

export type ProgramStep = ({ readonly kind: 'call'; readonly call: TracedCall } | { readonly kind: 'fused'; readonly group: FusedGroup }) & {
  /** Traced handles of intermediates whose last use is this step: released after it. */
  readonly frees: readonly object[];
};

export interface Program {
  readonly steps: readonly ProgramStep[];
  /** Produced by the function and alive after it without being returned (a gradient, an optimizer state): written back each run. */
  readonly escapees: readonly { readonly handle: object; readonly backend: Backend }[];
  /** Elementwise calls dropped because nothing read what they made. */
  readonly deadCalls: number;
  /** Adds folded into the matmul before them (a bias or residual epilogue). */
  readonly epilogues: number;
}

/** Each rewrite on/off: tests and benches compare a program with and without it. */
export const compileTuning = { fuse: true, reductions: true, reductionEpilogues: true, epilogues: true };

const ELEMENTWISE = new Set(['unary', 'binary', 'where', 'cast']);
const PURE = new Set(['unary', 'binary', 'where', 'cast', 'fill', 'allocBytes']);

function handlesOf(call: TracedCall, v: unknown): object[] {
  const out: object[] = [];
  forEachHandle(call.backend, v, (h) => out.push(h));
  return out;
}

/** The iteration shape of an elementwise call. */
function shapeOf(call: TracedCall): Shape {
  if (call.method === 'unary' || call.method === 'cast') return (call.args[call.method === 'unary' ? 1 : 0] as Operand<object>).view.shape;
  return call.args[3] as Shape;
}

/** The operands of an elementwise call, in the fused node's order. */
function operandsOf(call: TracedCall): (Operand<object> | ScalarOperand)[] {
  switch (call.method) {
    case 'unary':
      return [call.args[1] as Operand<object>];
    case 'cast':
      return [call.args[0] as Operand<object>];
    case 'binary':
      return [call.args[1], call.args[2]] as (Operand<object> | ScalarOperand)[];
    default:
      return [call.args[0], call.args[1], call.args[2]] as (Operand<object> | ScalarOperand)[];
  }
}

const sameShape = (a: Shape, b: Shape) => a.length === b.length && a.every((d, i) => d === b[i]);
const isPlain = (view: View, shape: Shape) => view.offset === 0 && sameShape(view.shape, shape) && isContiguous(view);
const viewKey = (v: View) => `${v.shape.join(',')}|${v.strides.join(',')}|${v.offset}`;

export function buildProgram(trace: Trace, outputs: ReadonlySet<object>): Program {
  const calls = trace.calls;
  const producer = new Map<object, number>();
  calls.forEach((c, i) => {
    for (const h of handlesOf(c, c.out)) if (!producer.has(h)) producer.set(h, i);
  });
  const kept = (h: object) => outputs.has(h) || (producer.has(h) && !trace.freed.has(h));
  const escapees = [...producer.entries()]
    .filter(([h]) => !trace.freed.has(h) && !outputs.has(h))
    .map(([handle, i]) => ({ handle, backend: calls[i].backend }));

  // Dead elementwise work: a pure call none of whose results is read or kept (from the end, so chains go too).
  const uses = new Map<object, number>();
  const argHandles = calls.map((c) => handlesOf(c, c.args));
  for (const hs of argHandles) for (const h of hs) uses.set(h, (uses.get(h) ?? 0) + 1);
  const live = calls.map(() => true);
  for (let i = calls.length - 1; i >= 0; i--) {
    const c = calls[i];
    if (!PURE.has(c.method)) continue;
    const outs = handlesOf(c, c.out);
    if (outs.length === 0 || outs.some((h) => kept(h) || (uses.get(h) ?? 0) > 0)) continue;
    live[i] = false;
    for (const h of argHandles[i]) uses.set(h, (uses.get(h) ?? 0) - 1);
  }
  const { rewritten: epilogues, folded } = compileTuning.epilogues
    ? fuseEpilogues(calls, live, argHandles, kept)
    : { rewritten: new Map<number, TracedCall>(), folded: 0 };
  const kept_ = calls.map((c, i) => ({ c: epilogues.get(i) ?? c, i })).filter((x) => live[x.i]);
  for (const [i, c] of epilogues) argHandles[i] = handlesOf(c, c.args);

  // Runs of consecutive elementwise calls on one backend over one shape.
  const units: { calls: { c: TracedCall; i: number }[] }[] = [];
  let run: { c: TracedCall; i: number }[] = [];
  const flush = () => {
    if (run.length) units.push({ calls: run });
    run = [];
  };
  for (const x of kept_) {
    if (!ELEMENTWISE.has(x.c.method)) {
      flush();
      units.push({ calls: [x] });
      continue;
    }
    if (run.length) {
      const shape = shapeOf(run[0].c);
      const inRun = new Set(run.flatMap((r) => handlesOf(r.c, r.c.out)));
      const joins =
        run[0].c.backend === x.c.backend &&
        sameShape(shapeOf(x.c), shape) &&
        operandsOf(x.c).every((o) => isScalarOperand(o) || !inRun.has(o.handle) || isPlain(o.view, shape));
      if (!joins) flush();
    }
    run.push(x);
  }
  flush();

  // Readers of each handle by call index, to tell which values of a run are read after it.
  const readers = new Map<object, number[]>();
  for (const x of kept_) for (const h of argHandles[x.i]) (readers.get(h) ?? readers.set(h, []).get(h)!).push(x.i);

  const steps: { step: { kind: 'call'; call: TracedCall } | { kind: 'fused'; group: FusedGroup }; reads: object[]; writes: object[] }[] = [];
  for (let u = 0; u < units.length; u++) {
    const unit = units[u];
    const reduced = compileTuning.reductions && compileTuning.fuse ? reductionOf(unit.calls, units[u + 1]?.calls, readers, kept) : undefined;
    if (reduced) {
      steps.push({ step: { kind: 'fused', group: reduced }, reads: reduced.args.inputs.map((x) => x.handle), writes: [reduced.reduce!.out] });
      u++;
      continue;
    }
    const then = compileTuning.reductionEpilogues && compileTuning.fuse ? reductionEpilogueOf(unit.calls, units[u + 1]?.calls, readers, kept) : undefined;
    if (then) {
      const inputs = then.args.inputs.slice(0, -1).map((x) => x.handle);
      steps.push({ step: { kind: 'fused', group: then }, reads: [then.reducedFirst!.x.handle, ...inputs], writes: [...then.outs] });
      u++;
      continue;
    }
    if (unit.calls.length === 1 && !ELEMENTWISE.has(unit.calls[0].c.method)) {
      const { c, i } = unit.calls[0];
      steps.push({ step: { kind: 'call', call: c }, reads: argHandles[i], writes: handlesOf(c, c.out) });
      continue;
    }
    if (unit.calls.length === 1 || !compileTuning.fuse) {
      for (const { c, i } of unit.calls) steps.push({ step: { kind: 'call', call: c }, reads: argHandles[i], writes: handlesOf(c, c.out) });
      continue;
    }
    for (const group of fuseRun(unit.calls, readers, kept)) {
      steps.push({ step: { kind: 'fused', group }, reads: group.args.inputs.map((x) => x.handle), writes: [...group.outs] });
    }
  }

  // Release each intermediate after the step that last touches it.
  const last = new Map<object, number>();
  steps.forEach((s, k) => {
    for (const h of [...s.reads, ...s.writes]) if (producer.has(h) && !kept(h)) last.set(h, k);
  });
  const frees = steps.map(() => [] as object[]);
  for (const [h, k] of last) frees[k].push(h);
  return {
    steps: steps.map((s, k) => ({ ...s.step, frees: frees[k] })),
    escapees,
    deadCalls: live.filter((l) => !l).length - folded,
    epilogues: folded,
  };
}

/**
 * GEMM epilogues: `add(matmul(a, b), r)` where r is a [n] row broadcast (a bias) or a plain [m, n] tensor (a
 * residual) becomes the matmul with that epilogue, which adds r to the float32 product before the one store, as the
 * add would (float32 results of 2-D products; r must exist when the matmul runs and nothing may write it between).
 * An activation (gelu, silu, relu, tanh, sigmoid) of the matmul's result (after its bias) folds the same way: the
 * epilogue computes it with the elementwise op's own expression, so the bits are the eager ones; a residual add
 * may still follow it. Returns the rewritten matmul calls by index and how many ops folded; those are marked dead.
 */
function fuseEpilogues(
  calls: readonly TracedCall[],
  live: boolean[],
  argHandles: object[][],
  kept: (h: object) => boolean,
): { rewritten: Map<number, TracedCall>; folded: number } {
  let folded = 0;
  const out = new Map<number, TracedCall>();
  const producer = new Map<object, number>();
  const readers = new Map<object, number[]>();
  calls.forEach((c, i) => {
    if (!live[i]) return;
    forEachHandle(c.backend, c.out, (h) => producer.set(h, i));
    for (const h of argHandles[i]) (readers.get(h) ?? readers.set(h, []).get(h)!).push(i);
  });
  calls.forEach((call, j) => {
    if (!live[j] || call.args[call.method === 'binary' ? 4 : 2] !== 'float32') return;
    // act(matmul): the activation in the epilogue, before any residual (so not after one).
    if (call.method === 'unary' && (EPILOGUE_UNARY_OPS as readonly string[]).includes(call.args[0] as string)) {
      const x = call.args[1] as Operand<object>;
      const i = producer.get(x.handle);
      const mm = i === undefined ? undefined : (out.get(i) ?? calls[i]);
      if (i === undefined || mm?.method !== 'kernel' || mm.name !== 'matmul' || mm.out !== x.handle || kept(x.handle)) return;
      if ((readers.get(x.handle) ?? []).length !== 1 || !isPlain(x.view, x.view.shape)) return;
      const args = mm.args[0] as MatmulArgs<object>;
      const s = args.scaling ?? {};
      if (args.dims.batch.length || args.outDtype !== 'float32' || s.activation || s.residual || s.unary) return;
      out.set(i, { ...mm, args: [{ ...args, scaling: { ...s, unary: call.args[0] as EpilogueUnary } }], out: call.out });
      forEachHandle(call.backend, call.out, (h) => producer.set(h, i));
      live[j] = false;
      folded++;
      return;
    }
    const add = call;
    if (add.method !== 'binary' || add.args[0] !== 'add') return;
    const shape = add.args[3] as Shape;
    if (shape.length !== 2) return;
    const [m, n] = shape;
    const operands = [add.args[1], add.args[2]] as (Operand<object> | ScalarOperand)[];
    for (const [k, x] of operands.entries()) {
      const r = operands[1 - k];
      if (isScalarOperand(x) || isScalarOperand(r) || !isPlain(x.view, shape) || kept(x.handle) || r.handle === x.handle) continue;
      const i = producer.get(x.handle);
      const mm = i === undefined ? undefined : (out.get(i) ?? calls[i]);
      if (i === undefined || mm?.method !== 'kernel' || mm.name !== 'matmul' || mm.out !== x.handle) continue;
      if ((readers.get(x.handle) ?? []).length !== 1) continue;
      const args = mm.args[0] as MatmulArgs<object>;
      const s = args.scaling ?? {};
      if (args.dims.batch.length || args.outDtype !== 'float32' || s.activation || s.residual || !DTYPE_INFO[r.dtype].isFloating) continue;
      // After an activation only a residual can follow (the epilogue's order); a row would be a bias inside it.
      const row = r.view.offset === 0 && r.view.strides[0] === 0 && r.view.strides[1] === 1 && !s.unary;
      // r must already exist when the matmul runs, and no call in between may write anything (only pure ones run).
      const made = producer.get(r.handle);
      if ((made !== undefined && made > i) || calls.slice(i + 1, j).some((c, d) => live[i + 1 + d] && !PURE.has(c.method))) continue;
      let scaling: MatmulArgs<object>['scaling'];
      if (row && !s.bias) scaling = { ...s, bias: { handle: r.handle, dtype: r.dtype, view: { shape: [n], strides: [1], offset: 0 } } };
      else if (isPlain(r.view, [m, n])) scaling = { ...s, residual: r };
      else continue;
      out.set(i, { ...mm, args: [{ ...args, scaling }], out: add.out });
      forEachHandle(add.backend, add.out, (h) => producer.set(h, i));
      live[j] = false;
      folded++;
      return;
    }
  });
  return { rewritten: out, folded };
}

/**
 * An elementwise run whose only value leaving it feeds the reduction right after it, as one fusedReduce: the chain
 * is evaluated where the reduction loads its input (the reduce kernel's own loop, so the bits are the same).
 */
function reductionOf(
  run: { c: TracedCall; i: number }[],
  next: { c: TracedCall; i: number }[] | undefined,
  readers: Map<object, number[]>,
  kept: (h: object) => boolean,
): FusedGroup | undefined {
  const r = next?.length === 1 ? next[0].c : undefined;
  if (!r || !ELEMENTWISE.has(run[0].c.method) || r.method !== 'kernel' || r.name !== 'reduce' || r.backend !== run[0].c.backend) return undefined;
  const args = r.args[0] as ReduceArgs<object>;
  const shape = shapeOf(run[0].c);
  if (!isPlain(args.x.view, shape) || (readers.get(args.x.handle) ?? []).length !== 1) return undefined;
  const group = fuseGroup(run, readers, kept);
  const scalars = group.args.nodes.reduce((s, n) => s + n.args.filter((a) => 'scalar' in a).length, 0);
  if (
    group.outs.length !== 1 ||
    group.outs[0] !== args.x.handle ||
    group.args.inputs.length + 1 + errorFlagBindings(group.args.nodes) > FUSED_MAP_MAX_BUFFERS ||
    scalars > FUSED_MAP_MAX_SCALARS
  )
    return undefined;
  const outBytes = (numel(shape) / Math.max(1, shape[args.dim])) * DTYPE_INFO[args.outDtype].itemBytes;
  const xBytes = numel(shape) * DTYPE_INFO[args.x.dtype].itemBytes;
  return {
    ...group,
    calls: [...group.calls, r],
    reduce: { op: args.op, dim: args.dim, outDtype: args.outDtype, out: r.out as object },
    bytesUnfused: group.bytesUnfused + xBytes + outBytes,
    bytesFused: group.bytesFused - xBytes + outBytes,
  };
}

/**
 * A reduction whose result only the elementwise run right after it reads, through its plain view, and which leaves
 * that run one value: one reduceMap, the chain evaluated on each result before the one store (`x.pow(2).mean(-1)`
 * then `.add(eps).rsqrt()`, a softmax's `sum` then `reciprocal`).
 */
function reductionEpilogueOf(
  unit: { c: TracedCall; i: number }[],
  next: { c: TracedCall; i: number }[] | undefined,
  readers: Map<object, number[]>,
  kept: (h: object) => boolean,
): FusedGroup | undefined {
  const r = unit.length === 1 ? unit[0] : undefined;
  if (!r || !next || r.c.method !== 'kernel' || r.c.name !== 'reduce' || !ELEMENTWISE.has(next[0].c.method) || next[0].c.backend !== r.c.backend)
    return undefined;
  const args = r.c.args[0] as ReduceArgs<object>;
  const out = r.c.out as object;
  const shape = shapeOf(next[0].c);
  const first = next[0].i;
  const last = next[next.length - 1].i;
  if (kept(out) || (readers.get(out) ?? []).some((i) => i < first || i > last)) return undefined;
  const reads = next.flatMap((x) => operandsOf(x.c)).filter((o) => !isScalarOperand(o) && o.handle === out) as Operand<object>[];
  if (!reads.length || reads.some((o) => !isPlain(o.view, shape))) return undefined;
  const group = fuseGroup(next, readers, kept);
  const scalars = group.args.nodes.reduce((s, n) => s + n.args.filter((a) => 'scalar' in a).length, 0);
  const k = group.args.inputs.findIndex((x) => x.handle === out);
  if (
    group.outs.length !== 1 ||
    k < 0 ||
    group.args.inputs.length + 1 + errorFlagBindings(group.args.nodes) > FUSED_MAP_MAX_BUFFERS ||
    scalars > FUSED_MAP_MAX_SCALARS
  )
    return undefined;
  // The reduction's result becomes the chain's last input.
  const end = group.args.inputs.length - 1;
  const swap = (ref: FusedRef): FusedRef => ('input' in ref ? { input: ref.input === k ? end : ref.input === end ? k : ref.input } : ref);
  const inputs = [...group.args.inputs];
  [inputs[k], inputs[end]] = [inputs[end], inputs[k]];
  const nodes = group.args.nodes.map((n) => ({ ...n, args: n.args.map(swap) }) as unknown as FusedNode);
  const outBytes = numel(shape) * DTYPE_INFO[args.outDtype].itemBytes;
  const xBytes = numel(args.x.view.shape) * DTYPE_INFO[args.x.dtype].itemBytes;
  return {
    ...group,
    args: { ...group.args, inputs, nodes },
    calls: [r.c, ...group.calls],
    reducedFirst: { x: args.x, op: args.op, dim: args.dim, outDtype: args.outDtype },
    bytesUnfused: group.bytesUnfused + xBytes + outBytes,
    bytesFused: group.bytesFused + xBytes - outBytes,
  };
}

/** One run as fused groups: the whole run, or pieces when it binds more buffers or numbers than a kernel takes. */
function fuseRun(run: { c: TracedCall; i: number }[], readers: Map<object, number[]>, kept: (h: object) => boolean): FusedGroup[] {
  const group = fuseGroup(run, readers, kept);
  const buffers = group.args.inputs.length + group.outs.length + errorFlagBindings(group.args.nodes);
  const scalars = group.args.nodes.reduce((s, n) => s + n.args.filter((r) => 'scalar' in r).length, 0);
  if ((buffers <= FUSED_MAP_MAX_BUFFERS && scalars <= FUSED_MAP_MAX_SCALARS) || run.length === 1) return [group];
  const half = Math.ceil(run.length / 2);
  return [...fuseRun(run.slice(0, half), readers, kept), ...fuseRun(run.slice(half), readers, kept)];
}

function fuseGroup(run: { c: TracedCall; i: number }[], readers: Map<object, number[]>, kept: (h: object) => boolean): FusedGroup {
  const shape = shapeOf(run[0].c);
  const first = run[0].i;
  const lastIndex = run[run.length - 1].i;
  const inputs: Operand<object>[] = [];
  const nodeOf = new Map<object, number>();
  const nodes: FusedNode[] = [];
  let bytesUnfused = 0;
  const item = (d: DType) => DTYPE_INFO[d].itemBytes;
  const n = numel(shape);
  for (const { c } of run) {
    const refs = operandsOf(c).map((o): FusedRef => {
      if (isScalarOperand(o)) return { scalar: o.scalar, dtype: o.dtype };
      bytesUnfused += numel(o.view.shape) * item(o.dtype);
      const m = nodeOf.get(o.handle);
      if (m !== undefined) return { node: m };
      const found = inputs.findIndex((x) => x.handle === o.handle && x.dtype === o.dtype && viewKey(x.view) === viewKey(o.view));
      if (found >= 0) return { input: found };
      inputs.push(o);
      return { input: inputs.length - 1 };
    });
    let node: FusedNode;
    switch (c.method) {
      case 'unary':
        node = { kind: 'unary', op: c.args[0] as never, args: [refs[0]], dtype: c.args[2] as DType };
        break;
      case 'binary':
        node = { kind: 'binary', op: c.args[0] as never, args: [refs[0], refs[1]], dtype: c.args[4] as DType };
        break;
      case 'where':
        node = { kind: 'where', args: [refs[0], refs[1], refs[2]], dtype: c.args[4] as DType };
        break;
      default:
        node = { kind: 'cast', args: [refs[0]], dtype: c.args[1] as DType, saturate: c.args[2] as boolean };
    }
    bytesUnfused += n * item(node.dtype);
    nodes.push(node);
    nodeOf.set(c.out as object, nodes.length - 1);
  }
  // A value leaves the kernel when it is kept or read by a call outside the run.
  const outs: object[] = [];
  const outputs: number[] = [];
  for (const [h, m] of nodeOf) {
    const outside = (readers.get(h) ?? []).some((i) => i < first || i > lastIndex);
    if (outside || kept(h)) {
      outs.push(h);
      outputs.push(m);
    }
  }
  const bytesFused = inputs.reduce((s, x) => s + numel(x.view.shape) * item(x.dtype), 0) + outputs.reduce((s, m) => s + n * item(nodes[m].dtype), 0);
  return { backend: run[0].c.backend, args: { shape, inputs, nodes, outputs }, outs, calls: run.map((r) => r.c), bytesUnfused, bytesFused };
}

/** One line per fused group, for explain(). */
export function describeGroup(g: FusedGroup): string {
  const ops = g.calls.map((c) =>
    c.method === 'unary' || c.method === 'binary'
      ? String(c.args[0])
      : c.method === 'kernel'
        ? `${(c.args[0] as ReduceArgs<object>).op}(dim ${(c.args[0] as ReduceArgs<object>).dim})`
        : c.method,
  );
  const dtypes = [...new Set(g.args.nodes.map((n) => n.dtype))].join('/');
  return `${g.reduce ? 'fusedReduce' : g.reducedFirst ? 'reduceMap' : 'fusedMap'} ${formatShape(g.args.shape)} ${dtypes}: ${ops.join(' > ')} (${g.calls.length} ops, ${g.args.inputs.length} in, ${g.outs.length} out; ${g.bytesUnfused} -> ${g.bytesFused} bytes)`;
}
