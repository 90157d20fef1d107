// Launchers of the elementwise kernels: the strided map (elementwise.wgsl) and its contiguous 32-bit fast path
// (elementwise-linear.wgsl) for every op in map-ops.ts (unary, binary, pow, where, cast/copy), the scatter copy
// and fill. An op is only its expression (map-ops.ts); the descriptions here give every op its bindings, loads,
// dtype codecs and loop.
import { DTYPES, isFloating, lanesPerWord, type DType } from '../../../core/dtype.js';
import { ShapeError } from '../../../core/errors.js';
import { coalesceViews, contiguousView, formatShape, isContiguous, numel, type Shape, type View } from '../../../core/shape.js';
import { isScalarOperand, type BinaryOp, type Operand, type ScalarOperand, type UnaryOp } from '../../backend.js';
import { castCode, scalarValue } from '../../../core/codecs.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../gpu-context.js';
import { defineKernel } from './kernel.js';
import { ZERO_DIVISOR_WGSL } from './device-error.js';
import { MAP_OPS, mapExpression, mapReports } from './map-ops.js';
import { computeTypeOf, decodeExpr, encodeFn, wgslSource, type ComputeType } from './wgsl.js';

const MAX_RANK = 8;

/**
 * linearFastPath off sends every map through the strided kernel: tests and benches compare the two paths.
 * loopTail: the fast path's tail as it was before issue 35 (a loop after an early return), kept so the bench can time
 * both in one process (bench/elementwise.bench.ts); it is in the pipeline key.
 */
export const elementwiseTuning = { linearFastPath: true, loopTail: false };

export interface GpuOperand {
  readonly buffer: GpuBuffer;
  readonly dtype: DType;
  readonly view: View;
}

/** A backend operand as the kernels take it. */
export function toGpuOperand(x: Operand<GpuBuffer>): GpuOperand {
  return { buffer: x.handle, dtype: x.dtype, view: x.view };
}

/** How a kernel input is addressed, from cheapest to most general (part of the pipeline key); 'uniform': a JS number in the params. */
type Access = 'linear' | 'scalar' | 'strided' | 'uniform';

/** How a view is read: one element, a contiguous run, or by strides (the fused maps read their inputs the same way). */
export function accessOf(view: View): Exclude<Access, 'uniform'> {
  if (view.shape.length === 0) return 'scalar';
  if (view.shape.length === 1 && view.strides[0] === 1) return 'linear';
  for (let d = 0; d < view.strides.length; d++) if (view.strides[d] !== 0) return 'strided';
  return 'scalar';
}

/** A map input: a view of a buffer, or a number carried in the uniform block. */
type MapInput = GpuOperand | ScalarOperand;

/** 'raw': the map moves storage codes unconverted (u32), for copies and single-dtype selections. */
export type MapCompute = ComputeType | 'raw';

/** A where() map's compute type: raw codes when both sides (a number counts as either) are of the output's dtype. */
export function whereCompute(a: { dtype: DType; number: boolean }, b: { dtype: DType; number: boolean }, outDtype: DType): MapCompute {
  const raw = [a, b].every((x) => x.number || x.dtype === outDtype);
  return raw ? 'raw' : computeTypeOf(a.dtype, b.dtype, outDtype);
}

/** A cast's: raw codes for a copy to the same dtype (NaN payloads kept), else f32 unless both sides are integers. */
export function castCompute(from: DType, outDtype: DType, saturate: boolean): MapCompute {
  return from === outDtype && !saturate ? 'raw' : computeTypeOf(from, outDtype);
}
const COMPUTE = ['f32', 'i32', 'raw'] as const;
/** The WGSL type a map's values have in compute type c (raw codes are u32). */
const valueType = (c: MapCompute) => (c === 'raw' ? 'u32' : c);
/** The compute type of a packed binding's generated helpers (unused by a raw map, which reads codes). */
const helperCompute = (c: MapCompute): ComputeType => (c === 'raw' ? 'i32' : c);

/**
 * An argument of a map as its variant field: '' (absent) or `dtype:access`, plus `:vec4|word` (how the fast path
 * binds it) for a linear tensor in the fast path.
 */
interface Arg {
  readonly dtype: DType;
  readonly access: Access;
  readonly binding: LinearBinding;
  /** Its binding slot among the tensor arguments (-1: a number in the uniforms). */
  readonly slot: number;
}

function parseArgs(fields: readonly string[]): Arg[] {
  const args: Arg[] = [];
  let slot = 0;
  for (const f of fields) {
    if (!f) break;
    const [dtype, access, binding] = f.split(':') as [DType, Access, LinearBinding | undefined];
    args.push({ dtype, access, binding: binding ?? 'word', slot: access === 'uniform' ? -1 : slot++ });
  }
  return args;
}

interface MapVariant {
  readonly op: string;
  readonly x: string;
  readonly y: string;
  readonly z: string;
}
const argsOf = (v: MapVariant) => parseArgs([v.x, v.y, v.z]);
const slotArg = (v: MapVariant, slot: number) => argsOf(v).find((a) => a.slot === slot);
const NAMES = ['x', 'y', 'z'];

/** The op as a WGSL function of its decoded arguments (`op(x, y, z) -> OutC`), with the helpers it calls. */
function opFunctions(v: MapVariant & { inC: MapCompute; outC: MapCompute }): string {
  const args = argsOf(v);
  const op = MAP_OPS[v.op];
  if (!op) throw new Error(`no elementwise op ${v.op}`);
  if (op.arity !== args.length) throw new Error(`elementwise op ${v.op} takes ${op.arity} inputs, got ${args.length}`);
  const inType = valueType(v.inC);
  const outType = valueType(v.outC);
  const files = [...(v.inC === 'f32' ? ['float-math.wgsl'] : []), ...(op.uses ?? [])];
  return (
    (mapReports(v.op, v.inC) ? ZERO_DIVISOR_WGSL : '') +
    files.map(wgslSource).join('\n') +
    `alias OutC = ${outType};\n` +
    `fn op(${args.map((_, k) => `${NAMES[k]}: ${inType}`).join(', ')}) -> OutC {\n  return ${mapExpression(v.op, v.inC)};\n}\n`
  );
}

/** The device error flag, bound by a map whose op reports (an integer division: a zero divisor). */
const ERROR_FLAG = { type: 'atomic<u32>', when: (v: MapVariant & { inC: MapCompute }) => mapReports(v.op, v.inC) } as const;

type StridedVariant = MapVariant & { readonly inC: MapCompute };
/** Tensor argument `slot` of the strided map: packed in its dtype, bound when the map has that many tensors. */
const stridedInput = (slot: number) => ({
  packed: (v: MapVariant) => slotArg(v, slot)!.dtype,
  compute: (v: StridedVariant) => helperCompute(v.inC),
  when: (v: MapVariant) => slotArg(v, slot) !== undefined,
});
/** Tensor argument `slot` of the fast path: words or vec4s of words. */
const linearInput = (slot: number) => ({
  type: (v: MapVariant) => (slotArg(v, slot)?.binding === 'vec4' ? ('vec4<u32>' as const) : ('u32' as const)),
  when: (v: MapVariant) => slotArg(v, slot) !== undefined,
});

/** The strided map: any views, any dtypes, one output word per invocation. */
const stridedMap = defineKernel({
  name: 'map',
  source: 'elementwise.wgsl',
  variant: { op: 'string', out: 'dtype', inC: COMPUTE, outC: COMPUTE, saturate: 'boolean', x: 'string', y: 'string', z: 'string' },
  params: {
    n: 'u32', // output elements
    rank: 'u32', // dims of the (coalesced) iteration shape, <= 8
    off0: 'u32',
    off1: 'u32',
    off2: 'u32', // first element of each tensor argument, by binding slot
    shape: 'u32[8]',
    strides0: 'u32[8]',
    strides1: 'u32[8]',
    strides2: 'u32[8]',
    scalar0: 'u32',
    scalar1: 'u32',
    scalar2: 'u32', // storage code of a number argument, by argument
  },
  outputs: {
    out: { packed: 'out', compute: (v) => helperCompute(v.outC), saturate: (v) => v.saturate, helpers: (v) => v.outC !== 'raw' },
    err: ERROR_FLAG,
  },
  inputs: { in0: stridedInput(0), in1: stridedInput(1), in2: stridedInput(2) },
  grid: { words: 'n', element: 'map_element' },
  functions: (v) => {
    const numbers = argsOf(v)
      .map((a, k) =>
        a.slot >= 0
          ? ''
          : `fn number${k}() -> ${valueType(v.inC)} {\n  return ${v.inC === 'raw' ? `p.scalar${k}` : decodeExpr(a.dtype, `p.scalar${k}`, v.inC)};\n}\n`,
      )
      .join('');
    return opFunctions(v) + numbers + (v.outC === 'raw' ? 'fn encode_out(v: u32) -> u32 {\n  return v;\n}\n' : '');
  },
  code: (v) => {
    const args = argsOf(v);
    const offset = (a: Arg) =>
      a.access === 'linear'
        ? `p.off${a.slot} + e`
        : a.access === 'scalar'
          ? `p.off${a.slot}`
          : `strided_offset(e, p.off${a.slot}, p.rank, p.shape, p.strides${a.slot})`;
    const load = (a: Arg, k: number) => (a.slot < 0 ? `number${k}()` : `${v.inC === 'raw' ? 'code' : 'load'}_in${a.slot}(${offset(a)})`);
    return {
      LOADS: args.map((a, k) => `  let ${NAMES[k]} = ${load(a, k)};`).join('\n'),
      ARGS: args.map((_, k) => NAMES[k]).join(', '),
    };
  },
});

/**
 * How the fast path binds a buffer: 'vec4' (array<vec4<u32>>: the first word is a multiple of 4 and the buffer
 * holds every vec4 the words touch, so the tail can index into its last one) or 'word' (array<u32>).
 */
type LinearBinding = 'vec4' | 'word';

function linearBinding(buffer: GpuBuffer, offset: number, n: number): LinearBinding {
  // GpuBuffer.size, not GPUBuffer.size: the latter is a call into the native binding on every dispatch.
  return offset % 4 === 0 && buffer.size >= Math.ceil((offset + n) / 4) * 16 ? 'vec4' : 'word';
}

/**
 * WGSL for argument k of the fast path: `codesK(v) -> vec4<u32>`, the codes of words 4v..4v+3, and `codeK(e) -> u32`,
 * word e's code (the tail).
 */
function linearLoadFns(k: number, a: Arg): string {
  const buf = `in${a.slot}`;
  const off = `p.off${a.slot}`;
  let four: string;
  let one: string;
  if (a.access === 'uniform') {
    four = `vec4<u32>(p.scalar${k})`;
    one = `p.scalar${k}`;
  } else if (a.access === 'scalar') {
    four = `vec4<u32>(${buf}[${off}])`;
    one = `${buf}[${off}]`;
  } else if (a.binding === 'vec4') {
    four = `${buf}[${off} + v]`;
    one = `${buf}[${off} + (e >> 2u)][e & 3u]`;
  } else {
    four = `vec4<u32>(${buf}[i], ${buf}[i + 1u], ${buf}[i + 2u], ${buf}[i + 3u])`;
    one = `${buf}[${off} + e]`;
  }
  const prelude = four.includes('[i]') ? `  let i = ${off} + v * 4u;\n` : '';
  return `fn codes${k}(v: u32) -> vec4<u32> {\n${prelude}  return ${four};\n}\nfn code${k}(e: u32) -> u32 {\n  return ${one};\n}\n`;
}

/**
 * The plain contiguous map (every argument linear, a broadcast element or a number; 32-bit dtypes): no strides, 4
 * words an invocation. The strided kernel pays a loop, a bounds check and an index computation per element,
 * which a software adapter turns straight into time.
 */
const linearMap = defineKernel({
  name: 'map-linear',
  source: 'elementwise-linear.wgsl',
  variant: {
    op: 'string',
    out: 'dtype',
    inC: COMPUTE,
    outC: COMPUTE,
    saturate: 'boolean',
    outWord: ['vec4', 'word'],
    tail: ['none', 'unrolled', 'loop'],
    x: 'string',
    y: 'string',
    z: 'string',
  },
  params: {
    n: 'u32', // output words (= elements)
    off0: 'u32',
    off1: 'u32',
    off2: 'u32', // a tensor argument's first word, in vec4s when bound as array<vec4<u32>>
    scalar0: 'u32',
    scalar1: 'u32',
    scalar2: 'u32',
  },
  outputs: { out: { type: (v) => (v.outWord === 'vec4' ? 'vec4<u32>' : 'u32') }, err: ERROR_FLAG },
  inputs: { in0: linearInput(0), in1: linearInput(1), in2: linearInput(2) },
  grid: 'custom',
  functions: (v) => {
    const args = argsOf(v);
    const raw = v.inC === 'raw';
    const decoded = args.map((a, k) => `  let ${NAMES[k]} = ${raw ? `c${k}` : decodeExpr(a.dtype, `c${k}`, v.inC as ComputeType)};\n`).join('');
    const mapWord = `fn map_word(${args.map((_, k) => `c${k}: u32`).join(', ')}) -> u32 {\n${decoded}  return ${raw ? '' : 'encode_out'}(op(${args.map((_, k) => NAMES[k]).join(', ')}));\n}\n`;
    const encode = raw ? '' : encodeFn('encode_out', v.out, v.outC as ComputeType, v.saturate);
    return args.map((a, k) => linearLoadFns(k, a)).join('') + encode + opFunctions(v) + mapWord;
  },
  code: (v) => {
    const args = argsOf(v);
    const lanesOf = (c: string) => args.map((_, k) => `a${k}.${c}`).join(', ');
    const words = ['x', 'y', 'z', 'w'].map((c) => `map_word(${lanesOf(c)})`);
    const one = `map_word(${args.map((_, k) => `code${k}(e)`).join(', ')})`;
    return {
      MAP4:
        args.map((_, k) => `    let a${k} = codes${k}(v);\n`).join('') +
        (v.outWord === 'vec4' ? `    out[v] = vec4<u32>(${words.join(', ')});` : words.map((w, j) => `    out[base + ${j}u] = ${w};`).join('\n')) +
        (v.tail === 'loop' ? '\n    return;' : ''),
      // 'none': the last invocation maps a whole vec4 too (see runMap). 'unrolled': `else if (base < p.n)`, lane 0
      // of the tail always there, lanes 1 and 2 guarded; no loop, no early return. 'loop': the form before issue 35
      // (MAP4 returns, a loop follows).
      FULL: v.tail === 'none' ? 'base < p.n' : 'base + 4u <= p.n',
      TAIL:
        v.tail === 'none'
          ? ''
          : v.tail === 'loop'
            ? `\n  for (var e = base; e < p.n; e++) {\n    ${store(v, one)}\n  }`
            : ` else if (base < p.n) {\n${[0, 1, 2]
                .map((j) => {
                  const body = `{\n      let e = base + ${j}u;\n      ${store(v, one)}\n    }`;
                  return j === 0 ? `    ${body}` : `    if (base + ${j}u < p.n) ${body}`;
                })
                .join('\n')}\n  }`,
    };
  },
});

/** The fast path's store of word e of the output. */
const store = (v: { outWord: string }, value: string) => (v.outWord === 'vec4' ? `out[e >> 2u][e & 3u] = ${value};` : `out[e] = ${value};`);

/** One float32's bits, through a scratch word (scalarCode runs on every dispatch with a number operand). */
const f32Bits = new Float32Array(1);
const f32Word = new Uint32Array(f32Bits.buffer);

/**
 * The storage code of a number argument: in its own dtype (int32 two's complement, float32 bits), or, for a raw
 * map, in the output's dtype (rounded through its own dtype first, as the CPU backend does).
 */
export function scalarCode(x: ScalarOperand, raw: DType | undefined): number {
  const dtype = raw ?? x.dtype;
  const value = raw ? scalarValue(x) : x.scalar;
  if (dtype === 'float32') {
    f32Bits[0] = value;
    return f32Word[0];
  }
  return castCode(value, dtype) >>> 0;
}

/**
 * Every variant field of an argument (`dtype:access`, `dtype:access:vec4`, `dtype:access:word`), made once: a
 * dispatch builds no string, and the kernel's variant lookup finds the same string objects (hashes computed once).
 */
const ARG_FIELDS = Object.fromEntries(
  DTYPES.map((dtype) => [
    dtype,
    Object.fromEntries(
      (['linear', 'scalar', 'strided', 'uniform'] as const).map((a) => [a, { plain: `${dtype}:${a}`, vec4: `${dtype}:${a}:vec4`, word: `${dtype}:${a}:word` }]),
    ),
  ]),
) as Record<DType, Record<Access, { readonly plain: string } & Record<LinearBinding, string>>>;

const argField = (x: MapInput | undefined, access: Access | undefined, binding?: LinearBinding): string =>
  x === undefined ? '' : ARG_FIELDS[x.dtype][access!][binding ?? 'plain'];

type Writable<T> = { -readonly [K in keyof T]: T[K] };
/**
 * What runMap passes to run(): one object each, refilled every dispatch (run() reads them during the call only and
 * copies a variant it keeps), so an eager op makes no variant, params, buffers or options object, and no string.
 */
const linearVariant: Writable<Parameters<typeof linearMap.run>[1]> = {
  op: '',
  out: 'float32',
  inC: 'f32',
  outC: 'f32',
  saturate: false,
  outWord: 'vec4',
  tail: 'none',
  x: '',
  y: '',
  z: '',
};
const linearParams: Writable<Parameters<typeof linearMap.run>[2]> = { n: 0, off0: 0, off1: 0, off2: 0, scalar0: 0, scalar1: 0, scalar2: 0 };
const linearOptions = { threads: 0 };
const stridedVariant: Writable<Parameters<typeof stridedMap.run>[1]> = {
  op: '',
  out: 'float32',
  inC: 'f32',
  outC: 'f32',
  saturate: false,
  x: '',
  y: '',
  z: '',
};
const NO_DIMS: readonly number[] = Object.freeze([]);
const stridedParams: Writable<Parameters<typeof stridedMap.run>[2]> = {
  n: 0,
  rank: 0,
  off0: 0,
  off1: 0,
  off2: 0,
  shape: NO_DIMS,
  strides0: NO_DIMS,
  strides1: NO_DIMS,
  strides2: NO_DIMS,
  scalar0: 0,
  scalar1: 0,
  scalar2: 0,
};
const mapBuffers: { out: GpuBuffer; err: GpuBuffer | undefined; in0: GpuBuffer | undefined; in1: GpuBuffer | undefined; in2: GpuBuffer | undefined } = {
  out: undefined as unknown as GpuBuffer,
  err: undefined,
  in0: undefined,
  in1: undefined,
  in2: undefined,
};
/** Per argument: how it is read, its tensor slot (-1: a number), its linear binding and its storage code if a number. */
const argAccess: Access[] = ['uniform', 'uniform', 'uniform'];
const argSlot = [-1, -1, -1];
const argBinding: LinearBinding[] = ['word', 'word', 'word'];
const argCode = [0, 0, 0];

/** Whether every tensor input reads whole 32-bit words in row-major order: each then coalesces to one linear run. */
function allRowMajorWords(inputs: readonly MapInput[], count: number): boolean {
  for (let k = 0; k < count; k++) {
    const x = inputs[k];
    if (!isScalarOperand(x) && (lanesPerWord(x.dtype) !== 1 || !isContiguous(x.view))) return false;
  }
  return true;
}

/**
 * A map's inputs, refilled by each runMap (which is never re-entered) instead of an array per dispatch. Three slots
 * always: setting an array's length to 0 would drop its backing store, and the next push allocate one again.
 */
const mapInputs: (MapInput | undefined)[] = [undefined, undefined, undefined];

/**
 * The last coalescing of frozen views, by identity: an op repeated over operands of one layout (x + bias, layer
 * after layer or step after step: results share one layout per shape array, a broadcast view is kept per layout)
 * coalesces once. Frozen arrays and views cannot change, so a hit is the same coalescing.
 */
let lastCoalesced: { shape: Shape; inputs: View[]; views: View[] } | undefined;
const frozenView = (v: View) => Object.isFrozen(v) && Object.isFrozen(v.shape) && Object.isFrozen(v.strides);

/** The output's view and each tensor input's, coalesced (views[0] is the output's; tensor slot s is views[s + 1]). */
function coalescedViews(outShape: Shape, inputs: readonly MapInput[], count: number): View[] {
  const last = lastCoalesced;
  if (last !== undefined && last.shape === outShape) {
    let t = 0;
    let same = true;
    for (let k = 0; same && k < count; k++) {
      const input = inputs[k];
      if (!isScalarOperand(input)) same = t < last.inputs.length && last.inputs[t++] === input.view;
    }
    if (same && t === last.inputs.length) return last.views;
  }
  const all: View[] = [contiguousView(outShape)];
  for (let k = 0; k < count; k++) {
    const input = inputs[k];
    if (!isScalarOperand(input)) all.push(input.view);
  }
  const views = coalesceViews(all);
  if (views[0].shape.length > MAX_RANK)
    throw new ShapeError(`elementwise kernels index at most ${MAX_RANK} non-mergeable dims, got shape ${formatShape(views[0].shape)}`);
  const inputViews = all.slice(1);
  if (Object.isFrozen(outShape) && inputViews.every(frozenView)) lastCoalesced = { shape: outShape, inputs: inputViews, views };
  return views;
}

/**
 * Runs an elementwise map (`op`, its name in MAP_OPS) of one to three inputs into a new contiguous buffer of
 * outShape. inC and outC: the compute types of the inputs and of the result (comparisons compute f32, return i32).
 */
function runMap(
  ctx: GpuContext,
  op: string,
  outDtype: DType,
  inC: MapCompute,
  outC: MapCompute,
  saturate: boolean,
  outShape: Shape,
  x: MapInput,
  y?: MapInput,
  z?: MapInput,
): GpuBuffer {
  const n = numel(outShape);
  const lanes = lanesPerWord(outDtype);
  const out = ctx.alloc(wordBytes(n, lanes));
  if (n === 0) return out;
  const inputs = mapInputs as MapInput[];
  inputs[0] = x;
  inputs[1] = y!;
  inputs[2] = z!;
  const count = z !== undefined ? 3 : y !== undefined ? 2 : 1;
  const linearPath = elementwiseTuning.linearFastPath && lanes === 1;
  // Row-major word inputs (the usual eager op) each coalesce to one linear run of n words from their offset, so
  // there is nothing to coalesce; anything else is coalesced with the output's view (tensor slot s is views[s + 1]).
  let views: View[] | undefined;
  if (!(linearPath && n > 1 && allRowMajorWords(inputs, count))) views = coalescedViews(outShape, inputs, count);
  const raw = inC === 'raw' ? outDtype : undefined;
  const b = mapBuffers;
  b.out = out;
  const reports = mapReports(op, inC);
  b.err = reports ? ctx.deviceErrorFlag() : undefined;
  b.in0 = b.in1 = b.in2 = undefined;
  let slot = 0;
  let linear = linearPath;
  for (let k = 0; k < count; k++) {
    const input = inputs[k];
    if (isScalarOperand(input)) {
      argAccess[k] = 'uniform';
      argSlot[k] = -1;
      argCode[k] = scalarCode(input, raw);
      continue;
    }
    const access = views ? accessOf(views[slot + 1]) : 'linear';
    if (access === 'strided' || lanesPerWord(input.dtype) !== 1) linear = false;
    argAccess[k] = access;
    argSlot[k] = slot;
    argCode[k] = 0;
    if (slot === 0) b.in0 = input.buffer;
    else if (slot === 1) b.in1 = input.buffer;
    else b.in2 = input.buffer;
    slot++;
  }

  if (linear) {
    const outWord = linearBinding(out, 0, n);
    const p = linearParams;
    p.n = n;
    p.off0 = p.off1 = p.off2 = 0;
    // Tail-free: when the output and every linear input are bound as vec4s, their buffers hold the whole last vec4
    // (linearBinding), so the last invocation maps all 4 lanes and writes the words past n into the output
    // allocation's own padding (ctx.alloc: contents undefined, owned by no other tensor). Any tail code at all, even
    // a branch no invocation but the last takes, cost every invocation on SwiftShader, which runs both sides of a
    // branch under a lane mask: 1M-element add 15-16 ms tail-free against 31-32 ms with either tail form, 25 runs
    // interleaved in one process (docs/benchmarks.md, issue 35). A GPU skips the untaken branch, so this is neutral
    // there, and every adapter takes the same path: which one depends only on the buffers' alignment. Unaligned
    // views (word bindings) keep the unrolled tail: reading a whole vec4 past their end is not in their buffer.
    // A reporting op maps real elements only: the padding's words could be a zero divisor.
    let tailFree = outWord === 'vec4' && !reports;
    for (let k = 0; k < count; k++) {
      const s = argSlot[k];
      if (s < 0) continue;
      const input = inputs[k] as GpuOperand;
      // Coalescing keeps each view's offset: the first element is the operand's own offset either way.
      const offset = input.view.offset;
      let binding: LinearBinding = 'word';
      if (argAccess[k] === 'linear') {
        binding = linearBinding(input.buffer, offset, n);
        if (binding !== 'vec4') tailFree = false;
      }
      argBinding[k] = binding;
      const first = binding === 'vec4' ? offset / 4 : offset;
      if (s === 0) p.off0 = first;
      else if (s === 1) p.off1 = first;
      else p.off2 = first;
    }
    p.scalar0 = count > 0 ? argCode[0] : 0;
    p.scalar1 = count > 1 ? argCode[1] : 0;
    p.scalar2 = count > 2 ? argCode[2] : 0;
    const v = linearVariant;
    v.op = op;
    v.out = outDtype;
    v.inC = inC;
    v.outC = outC;
    v.saturate = saturate;
    v.outWord = outWord;
    v.tail = elementwiseTuning.loopTail ? 'loop' : tailFree ? 'none' : 'unrolled';
    v.x = count > 0 ? argField(inputs[0], argAccess[0], argSlot[0] < 0 ? undefined : argBinding[0]) : '';
    v.y = count > 1 ? argField(inputs[1], argAccess[1], argSlot[1] < 0 ? undefined : argBinding[1]) : '';
    v.z = count > 2 ? argField(inputs[2], argAccess[2], argSlot[2] < 0 ? undefined : argBinding[2]) : '';
    linearOptions.threads = Math.ceil(n / 4);
    linearMap.run(ctx, v, p, b, linearOptions);
  } else {
    // Not linear means coalesced: the row-major shortcut above is taken only on the linear path.
    const at = views!;
    const p = stridedParams;
    p.n = n;
    p.rank = at[0].shape.length;
    p.shape = at[0].shape;
    p.off0 = slot > 0 ? at[1].offset : 0;
    p.off1 = slot > 1 ? at[2].offset : 0;
    p.off2 = slot > 2 ? at[3].offset : 0;
    p.strides0 = slot > 0 ? at[1].strides : NO_DIMS;
    p.strides1 = slot > 1 ? at[2].strides : NO_DIMS;
    p.strides2 = slot > 2 ? at[3].strides : NO_DIMS;
    p.scalar0 = count > 0 ? argCode[0] : 0;
    p.scalar1 = count > 1 ? argCode[1] : 0;
    p.scalar2 = count > 2 ? argCode[2] : 0;
    const v = stridedVariant;
    v.op = op;
    v.out = outDtype;
    v.inC = inC;
    v.outC = outC;
    v.saturate = saturate;
    v.x = count > 0 ? argField(inputs[0], argAccess[0]) : '';
    v.y = count > 1 ? argField(inputs[1], argAccess[1]) : '';
    v.z = count > 2 ? argField(inputs[2], argAccess[2]) : '';
    stridedMap.run(ctx, v, p, b);
    p.shape = p.strides0 = p.strides1 = p.strides2 = NO_DIMS;
  }
  b.err = b.in0 = b.in1 = b.in2 = undefined;
  mapInputs[0] = mapInputs[1] = mapInputs[2] = undefined;
  return out;
}

/** computeTypeOf(a, b, c) without its argument array (every eager op asks). */
const computeOf = (a: DType, b: DType, c: DType): ComputeType => (isFloating(a) || isFloating(b) || isFloating(c) ? 'f32' : 'i32');

export function unaryKernel(ctx: GpuContext, op: UnaryOp, x: GpuOperand, outDtype: DType): GpuBuffer {
  const c = computeOf(x.dtype, outDtype, outDtype);
  return runMap(ctx, op, outDtype, c, c, false, x.view.shape, x);
}

export function binaryKernel(ctx: GpuContext, op: BinaryOp, a: MapInput, b: MapInput, outShape: Shape, outDtype: DType): GpuBuffer {
  const c = computeOf(a.dtype, b.dtype, outDtype);
  return runMap(ctx, op, outDtype, c, c, false, outShape, a, b);
}

/** where(cond, a, b) over views broadcast to outShape; cond is bool. One dtype throughout selects codes as they are. */
export function whereKernel(ctx: GpuContext, cond: GpuOperand, a: MapInput, b: MapInput, outShape: Shape, outDtype: DType): GpuBuffer {
  const side = (x: MapInput) => ({ dtype: x.dtype, number: isScalarOperand(x) });
  const c = whereCompute(side(a), side(b), outDtype);
  return runMap(ctx, 'where', outDtype, c, c, false, outShape, cond, a, b);
}

/** A contiguous copy of x in outDtype (contiguous(), to(dtype), clone()). */
export function castKernel(ctx: GpuContext, x: GpuOperand, outDtype: DType, saturate: boolean): GpuBuffer {
  // A copy to the same dtype moves codes as they are (NaN payloads included), as the CPU backend does; integers stay
  // exact when both sides are integers; anything touching a float goes through f32.
  const c = castCompute(x.dtype, outDtype, saturate);
  if (c === 'raw') return runMap(ctx, 'copy', outDtype, 'raw', 'raw', false, x.view.shape, x);
  return runMap(ctx, 'cast', outDtype, c, c, saturate, x.view.shape, x);
}

/**
 * For kernels that write packed outputs a word at a time when the words of one output row could straddle
 * workgroups: runs `compute` in float32 and casts to outDtype (one extra dispatch).
 */
export function viaFloat32(ctx: GpuContext, shape: Shape, outDtype: DType, saturate: boolean, compute: () => GpuBuffer): GpuBuffer {
  const f32 = compute();
  try {
    return castKernel(ctx, { buffer: f32, dtype: 'float32', view: contiguousView(shape) }, outDtype, saturate);
  } finally {
    ctx.release(f32);
  }
}

const scatter = defineKernel({
  name: 'scatter',
  source: 'scatter.wgsl',
  variant: { src: 'dtype', dst: 'dtype' },
  params: { n: 'u32', rank: 'u32', off0: 'u32', off1: 'u32', shape: 'u32[8]', strides0: 'u32[8]', strides1: 'u32[8]' },
  outputs: { out: { type: (v) => (lanesPerWord(v.dst) === 1 ? 'u32' : 'atomic<u32>'), packed: 'dst', compute: (v) => computeTypeOf(v.src, v.dst) } },
  inputs: { in0: { packed: 'src', compute: (v) => computeTypeOf(v.src, v.dst) } },
  grid: { threads: 'n', invoke: 'scatter_element' },
  code: (v) => {
    const lanes = lanesPerWord(v.dst);
    const bits = 32 / lanes;
    return {
      STORE:
        lanes === 1
          ? '  out[d] = code;'
          : [
              `  let word = d >> ${Math.log2(lanes)}u;`,
              `  let shift = (d & ${lanes - 1}u) * ${bits}u;`,
              `  atomicAnd(&out[word], ~(${(2 ** bits - 1) >>> 0}u << shift));`,
              `  atomicOr(&out[word], code << shift);`,
            ].join('\n'),
    };
  },
});

/** Writes src into the view dst of an existing buffer, converting to dst.dtype (shapes already equal). */
export function scatterKernel(ctx: GpuContext, src: GpuOperand, dst: GpuOperand): void {
  const n = numel(src.view.shape);
  if (n === 0) return;
  const [s, d] = coalesceViews([src.view, dst.view]);
  if (s.shape.length > MAX_RANK) throw new ShapeError(`elementwise kernels index at most ${MAX_RANK} non-mergeable dims, got shape ${formatShape(s.shape)}`);
  scatter.run(
    ctx,
    { src: src.dtype, dst: dst.dtype },
    { n, rank: s.shape.length, off0: s.offset, off1: d.offset, shape: s.shape, strides0: s.strides, strides1: d.strides },
    { out: dst.buffer, in0: src.buffer },
  );
}

const fill = defineKernel({
  name: 'fill',
  source: 'fill.wgsl',
  params: { words: 'u32', word: 'u32' },
  outputs: { out: 'u32' },
  grid: { threads: 'words', invoke: 'fill_word' },
});

/** A buffer of n elements of dtype all holding the storage code `code`. */
export function fillKernel(ctx: GpuContext, dtype: DType, n: number, code: number): GpuBuffer {
  const lanes = lanesPerWord(dtype);
  const out = ctx.alloc(wordBytes(n, lanes));
  const words = Math.ceil(n / lanes);
  if (words === 0) return out;
  let word = 0;
  for (let l = 0; l < lanes; l++) word = (word | (code << (l * (32 / lanes)))) >>> 0;
  fill.run(ctx, {}, { words, word }, { out });
  return out;
}
