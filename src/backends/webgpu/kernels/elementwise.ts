// Launchers for the elementwise kernels (unary, binary, cast/copy: the strided one and its contiguous 32-bit fast
// path) and the scatter copy.
import { lanesPerWord, type DType } from '../../../core/dtype.js';
import { ShapeError } from '../../../core/errors.js';
import { coalesceViews, contiguousView, formatShape, numel, type Shape, type View } from '../../../core/shape.js';
import { isScalarOperand, type BinaryOp, type ScalarOperand, type UnaryOp } from '../../backend.js';
import { castCode } from '../../cpu/cpu-backend.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../gpu-context.js';
import { commonWgsl, computeTypeOf, decodeExpr, encodeFn, fillTemplate, grid1d, loadFn, wgslSource, type ComputeType } from './wgsl.js';

const WG = 256;
const MAX_RANK = 8;

/** linearFastPath off sends every map through the strided kernel: tests and benches compare the two paths. */
export const elementwiseTuning = { linearFastPath: true };

export interface GpuOperand {
  readonly buffer: GpuBuffer;
  readonly dtype: DType;
  readonly view: View;
}

/** How a kernel input is addressed, from cheapest to most general (part of the pipeline key); 'uniform': a JS number in the params. */
type Access = 'linear' | 'scalar' | 'strided' | 'uniform';

function accessOf(view: View): Access {
  if (view.shape.length === 0) return 'scalar';
  if (view.shape.length === 1 && view.strides[0] === 1) return 'linear';
  if (view.strides.every((s) => s === 0)) return 'scalar';
  return 'strided';
}

/** A map input: a view of a buffer, or a number carried in the uniform block. */
type MapInput = GpuOperand | ScalarOperand;

function offsetExpr(k: number, access: Access): string {
  if (access === 'linear') return `p.off${k} + e`;
  if (access === 'scalar') return `p.off${k}`;
  return `strided_offset(e, p.off${k}, p.rank, p.shape, p.strides${k})`;
}

/**
 * Uniform block: n, rank, off0, off1, shape[8], strides0[8], strides1[8], scalar (matches Params in the .wgsl files;
 * scalar holds the storage code of a number operand).
 */
function params(n: number, views: readonly View[], scalar = 0): ArrayBuffer {
  const rank = views[0]?.shape.length ?? 0;
  if (rank > MAX_RANK) {
    throw new ShapeError(`elementwise kernels index at most ${MAX_RANK} non-mergeable dims, got shape ${formatShape(views[0].shape)}`);
  }
  const u = new Uint32Array(32);
  u[28] = scalar;
  u[0] = n;
  u[1] = rank;
  views.forEach((v, k) => {
    u[2 + k] = v.offset;
    v.strides.forEach((s, d) => (u[12 + 8 * k + d] = s));
  });
  views[0]?.shape.forEach((s, d) => (u[4 + d] = s));
  return u.buffer;
}

const F32_UNARY: Record<UnaryOp, string> = {
  neg: '-x',
  abs: 'abs(x)',
  exp: 'exp_safe(x)',
  log: 'log_safe(x)',
  sqrt: 'sqrt_safe(x)',
  rsqrt: 'rsqrt_safe(x)',
  silu: 'x / (1.0 + exp_safe(-x))',
  gelu: '0.5 * x * erfc_approx(-x * 0.7071067811865476)',
  gelu_tanh: '0.5 * x * (1.0 + tanh_safe(0.7978845608028654 * (x + 0.044715 * x * x * x)))',
  tanh: 'tanh_safe(x)',
  sigmoid: '1.0 / (1.0 + exp_safe(-x))',
  relu: 'select(max(x, 0.0), x, is_nan(x))',
};

const I32_UNARY: Partial<Record<UnaryOp, string>> = { neg: '-x', abs: 'abs(x)', relu: 'max(x, 0)' };

// Float helpers for op bodies: WGSL has no erf, and tanh of large |x| can be NaN on some drivers (exp overflow).
// WGSL leaves log/sqrt/inverseSqrt indeterminate outside their domain and drivers differ (SwiftShader: log(x) is
// log|x|, log(0) is -88, exp(NaN) is Inf), so the IEEE results the CPU backend gives are spelled out here.
const FLOAT_HELPERS = `
fn exp_safe(x: f32) -> f32 {
  return select(exp(x), x, is_nan(x));
}
fn log_safe(x: f32) -> f32 {
  if (is_nan(x) || x < 0.0) {
    return f32_bits(0x7fc00000u);
  }
  if (x == 0.0) {
    return f32_bits(0xff800000u);
  }
  return select(log(x), x, x == f32_bits(0x7f800000u));
}
fn sqrt_safe(x: f32) -> f32 {
  return select(sqrt(x), f32_bits(0x7fc00000u), is_nan(x) || x < 0.0);
}
fn rsqrt_safe(x: f32) -> f32 {
  if (is_nan(x) || x < 0.0) {
    return f32_bits(0x7fc00000u);
  }
  if (x == 0.0) {
    return f32_bits((bitcast<u32>(x) & 0x80000000u) | 0x7f800000u); // 1/sqrt(+-0) = +-Inf
  }
  return select(inverseSqrt(x), 0.0, x == f32_bits(0x7f800000u));
}
fn erfc_approx(x: f32) -> f32 {
  let z = abs(x);
  let t = 1.0 / (1.0 + 0.5 * z);
  let r = t * exp_safe(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 +
    t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return select(2.0 - r, r, x >= 0.0);
}
fn tanh_safe(x: f32) -> f32 {
  return select(tanh(clamp(x, -15.0, 15.0)), x, is_nan(x));
}
`;

function binaryExpr(op: BinaryOp, c: ComputeType): string {
  const one = c === 'f32' ? '1.0' : '1';
  const zero = c === 'f32' ? '0.0' : '0';
  const ordered = c === 'f32' ? '!is_nan(x) && !is_nan(y) && ' : '';
  const cmp = (cond: string) => `select(${zero}, ${one}, ${cond})`;
  switch (op) {
    case 'add':
      return 'x + y';
    case 'sub':
      return 'x - y';
    case 'mul':
      return 'x * y';
    case 'div':
      return 'x / y';
    // WGSL leaves max(0, -0) to the driver (SwiftShader returns y); the CPU backend orders -0 below +0, which for
    // equal operands is the AND (maximum) or OR (minimum) of their bits.
    case 'maximum':
      return c === 'f32' ? 'select(select(max(x, y), f32_bits(bitcast<u32>(x) & bitcast<u32>(y)), x == y), f32_bits(0x7fc00000u), is_nan(x) || is_nan(y))' : 'max(x, y)';
    case 'minimum':
      return c === 'f32' ? 'select(select(min(x, y), f32_bits(bitcast<u32>(x) | bitcast<u32>(y)), x == y), f32_bits(0x7fc00000u), is_nan(x) || is_nan(y))' : 'min(x, y)';
    case 'eq':
      return cmp(`${ordered}x == y`);
    case 'ne':
      return cmp(c === 'f32' ? 'is_nan(x) || is_nan(y) || x != y' : 'x != y');
    case 'lt':
      return cmp(`${ordered}x < y`);
    case 'le':
      return cmp(`${ordered}x <= y`);
    case 'gt':
      return cmp(`${ordered}x > y`);
    case 'ge':
      return cmp(`${ordered}x >= y`);
  }
}

interface MapSpec {
  /** Cache-key name of the operation. */
  name: string;
  /** WGSL statements ending in `return <value of out compute type>;`, with inputs loaded as x (and y). */
  body: string;
  inputs: readonly MapInput[];
  outDtype: DType;
  /** Compute type of the inputs (x, y) and of the result (may differ: comparisons compute f32, return i32). */
  inC: ComputeType;
  outC: ComputeType;
  saturate?: boolean;
  /** Copy storage codes unconverted (one input of outDtype): a decode/encode round trip would rewrite NaN payloads. */
  raw?: boolean;
}

/** `fn NAME(e: u32) -> u32`: the storage code of element e of `buffer` (dtype packed in u32 words), unconverted. */
function codeLoadFn(name: string, buffer: string, dtype: DType): string {
  const lanes = lanesPerWord(dtype);
  const bits = 32 / lanes;
  const code = lanes === 1 ? `${buffer}[e]` : `(${buffer}[e >> ${Math.log2(lanes)}u] >> ((e & ${lanes - 1}u) * ${bits}u)) & ${(2 ** bits - 1) >>> 0}u`;
  return `fn ${name}(e: u32) -> u32 {\n  return ${code};\n}\n`;
}

/** The storage code of a number operand in its dtype (int32 as two's complement, float32 as its bits). */
function scalarCode(x: ScalarOperand): number {
  if (x.dtype === 'int32') return castCode(x.scalar, 'int32') >>> 0;
  const f = new Float32Array([x.scalar]);
  return new Uint32Array(f.buffer)[0];
}

/** Runs an elementwise map into a new contiguous buffer of outShape. */
function runMap(ctx: GpuContext, spec: MapSpec, outShape: Shape): GpuBuffer {
  const n = numel(outShape);
  const lanes = lanesPerWord(spec.outDtype);
  const out = ctx.alloc(wordBytes(n, lanes));
  if (n === 0) return out;
  const tensors = spec.inputs.filter((x): x is GpuOperand => !isScalarOperand(x));
  const number = spec.inputs.find(isScalarOperand);
  const views = coalesceViews([contiguousView(outShape), ...tensors.map((x) => x.view)]).slice(1);
  // Input k's view index (tensor inputs only) and its binding, numbered without gaps after the output.
  let t = 0;
  const slots = spec.inputs.map((x) => (isScalarOperand(x) ? -1 : t++));
  const access: Access[] = spec.inputs.map((x, k) => (isScalarOperand(x) ? 'uniform' : accessOf(views[slots[k]])));
  if (elementwiseTuning.linearFastPath && lanes === 1 && tensors.every((x) => lanesPerWord(x.dtype) === 1) && !access.includes('strided')) {
    runLinearMap(ctx, spec, n, out, views, slots, access, number ? scalarCode(number) : 0);
    return out;
  }
  const key = ['map', spec.name, spec.outDtype, spec.saturate ? 'sat' : '', spec.raw ? 'raw' : '', spec.inC, spec.outC, ...spec.inputs.map((x, k) => `${x.dtype}:${access[k]}`)].join('|');
  const pipeline = ctx.pipeline(key, () => {
    const bindings = tensors.map((_, k) => `@group(0) @binding(${k + 2}) var<storage, read> in${k}: array<u32>;`).join('\n');
    const loads = spec.inputs
      .map((x, k) => {
        if (isScalarOperand(x)) return `fn load${k}(e: u32) -> ${spec.inC} {\n  return ${decodeExpr(x.dtype, 'p.scalar', spec.inC)};\n}\n`;
        return spec.raw ? codeLoadFn(`load${k}`, `in${slots[k]}`, x.dtype) : loadFn(`load${k}`, `in${slots[k]}`, x.dtype, spec.inC);
      })
      .join('');
    const encode = spec.raw ? 'fn encode_out(v: u32) -> u32 {\n  return v;\n}\n' : encodeFn('encode_out', spec.outDtype, spec.outC, spec.saturate);
    const names = ['x', 'y'];
    const body = spec.inputs.map((_, k) => `  let ${names[k]} = load${k}(${access[k] === 'uniform' ? '0u' : offsetExpr(slots[k], access[k])});\n`).join('') + `  ${spec.body}`;
    return commonWgsl() + fillTemplate(wgslSource(import.meta.url, 'elementwise.wgsl'), {
      INPUT_BINDINGS: bindings,
      FUNCTIONS: loads + encode + (spec.inC === 'f32' && !spec.raw ? FLOAT_HELPERS : ''),
      OUT_C: spec.raw ? 'u32' : spec.outC,
      BODY: body,
      WG,
      LANES: lanes,
      BITS: 32 / lanes,
    });
  });
  ctx.dispatch(pipeline, params(n, views, number ? scalarCode(number) : 0), [out, ...tensors.map((x) => x.buffer)], grid1d(Math.ceil(n / lanes), WG));
  return out;
}

/**
 * How the fast path binds a buffer: 'vec4' (array<vec4<u32>>: the first word is a multiple of 4 and the buffer
 * holds every vec4 the words touch, so the tail can index into its last one) or 'word' (array<u32>).
 */
type LinearBinding = 'vec4' | 'word';

function linearBinding(buffer: GpuBuffer, offset: number, n: number): LinearBinding {
  return offset % 4 === 0 && buffer.buffer.size >= Math.ceil((offset + n) / 4) * 16 ? 'vec4' : 'word';
}

/**
 * WGSL for input k of the fast path: `codesK(v) -> vec4<u32>`, the codes of words 4v..4v+3, and `codeK(e) -> u32`,
 * word e's code (the tail).
 */
function linearLoadFns(k: number, slot: number, access: Access, binding: LinearBinding): string {
  const buf = `in${slot}`;
  const off = `p.off${slot}`;
  let four: string;
  let one: string;
  if (access === 'uniform') {
    four = 'vec4<u32>(p.scalar)';
    one = 'p.scalar';
  } else if (access === 'scalar') {
    four = `vec4<u32>(${buf}[${off}])`;
    one = `${buf}[${off}]`;
  } else if (binding === 'vec4') {
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
 * The plain contiguous map (every input linear, a broadcast element or a number; 32-bit dtypes): no strides, 4
 * words an invocation (elementwise-linear.wgsl). The general kernel pays a loop, a bounds check and an index
 * computation per element, which a software adapter turns straight into time.
 */
function runLinearMap(ctx: GpuContext, spec: MapSpec, n: number, out: GpuBuffer, views: readonly View[], slots: readonly number[], access: readonly Access[], scalar: number): void {
  const outBinding = linearBinding(out, 0, n);
  const bindings: LinearBinding[] = [];
  const offsets = [0, 0];
  spec.inputs.forEach((x, k) => {
    if (isScalarOperand(x)) return;
    const offset = views[slots[k]].offset;
    const b = access[k] === 'linear' ? linearBinding(x.buffer, offset, n) : 'word';
    bindings[slots[k]] = b;
    offsets[slots[k]] = b === 'vec4' ? offset / 4 : offset;
  });
  const inputKey = spec.inputs.map((x, k) => `${x.dtype}:${access[k]}${slots[k] >= 0 ? `:${bindings[slots[k]]}` : ''}`);
  const key = ['map-linear', spec.name, spec.outDtype, spec.saturate ? 'sat' : '', spec.raw ? 'raw' : '', spec.inC, spec.outC, outBinding, ...inputKey].join('|');
  const tensors = spec.inputs.filter((x): x is GpuOperand => !isScalarOperand(x));
  const pipeline = ctx.pipeline(key, () => {
    const inputBindings = bindings
      .map((b, s) => `@group(0) @binding(${s + 2}) var<storage, read> in${s}: array<${b === 'vec4' ? 'vec4<u32>' : 'u32'}>;`)
      .join('\n');
    const names = ['x', 'y'];
    const params = spec.inputs.map((_, k) => `c${k}: u32`).join(', ');
    // map_word: one word's codes in, the output code out; the op body sees x (and y) in the compute type.
    const decoded = spec.inputs.map((x, k) => `  let ${names[k]} = ${spec.raw ? `c${k}` : decodeExpr(x.dtype, `c${k}`, spec.inC)};\n`).join('');
    const mapWord = [
      `fn op(${spec.inputs.map((_, k) => `${names[k]}: ${spec.raw ? 'u32' : spec.inC}`).join(', ')}) -> ${spec.raw ? 'u32' : spec.outC} {\n  ${spec.body}\n}\n`,
      `fn map_word(${params}) -> u32 {\n${decoded}  return ${spec.raw ? '' : 'encode_out'}(op(${names.slice(0, spec.inputs.length).join(', ')}));\n}\n`,
    ].join('');
    const loads = spec.inputs.map((_, k) => linearLoadFns(k, slots[k], access[k], slots[k] >= 0 ? bindings[slots[k]] : 'word')).join('');
    const encode = spec.raw ? '' : encodeFn('encode_out', spec.outDtype, spec.outC, spec.saturate);
    const lanesOf = (c: string) => spec.inputs.map((_, k) => `a${k}.${c}`).join(', ');
    const words = ['x', 'y', 'z', 'w'].map((c) => `map_word(${lanesOf(c)})`);
    const map4 =
      spec.inputs.map((_, k) => `    let a${k} = codes${k}(v);\n`).join('') +
      (outBinding === 'vec4'
        ? `    out[v] = vec4<u32>(${words.join(', ')});`
        : words.map((w, j) => `    out[base + ${j}u] = ${w};`).join('\n'));
    const one = `map_word(${spec.inputs.map((_, k) => `code${k}(e)`).join(', ')})`;
    const map1 = outBinding === 'vec4' ? `    out[e >> 2u][e & 3u] = ${one};` : `    out[e] = ${one};`;
    return commonWgsl() + fillTemplate(wgslSource(import.meta.url, 'elementwise-linear.wgsl'), {
      OUT_WORD: outBinding === 'vec4' ? 'vec4<u32>' : 'u32',
      INPUT_BINDINGS: inputBindings,
      FUNCTIONS: loads + encode + (spec.inC === 'f32' && !spec.raw ? FLOAT_HELPERS : '') + mapWord,
      MAP4: map4,
      MAP1: map1,
      WG,
    });
  });
  const u = new Uint32Array([n, offsets[0], offsets[1], scalar]);
  ctx.dispatch(pipeline, u.buffer, [out, ...tensors.map((x) => x.buffer)], grid1d(Math.ceil(n / 4), WG));
}

export function unaryKernel(ctx: GpuContext, op: UnaryOp, x: GpuOperand, outDtype: DType): GpuBuffer {
  const c = computeTypeOf(x.dtype, outDtype);
  const expr = c === 'f32' ? F32_UNARY[op] : I32_UNARY[op];
  if (!expr) throw new Error(`no integer kernel for ${op}`);
  return runMap(ctx, { name: op, body: `return ${expr};`, inputs: [x], outDtype, inC: c, outC: c }, x.view.shape);
}

export function binaryKernel(ctx: GpuContext, op: BinaryOp, a: MapInput, b: MapInput, outShape: Shape, outDtype: DType): GpuBuffer {
  const c = computeTypeOf(a.dtype, b.dtype, outDtype);
  return runMap(ctx, { name: op, body: `return ${binaryExpr(op, c)};`, inputs: [a, b], outDtype, inC: c, outC: c }, outShape);
}

/** A contiguous copy of x in outDtype (contiguous(), to(dtype), clone()). */
export function castKernel(ctx: GpuContext, x: GpuOperand, outDtype: DType, saturate: boolean): GpuBuffer {
  // A copy to the same dtype moves codes as they are (NaN payloads included), as the CPU backend does.
  if (x.dtype === outDtype && !saturate) return runMap(ctx, { name: 'copy', body: 'return x;', inputs: [x], outDtype, inC: 'i32', outC: 'i32', raw: true }, x.view.shape);
  // Keep integers exact when both sides are integers; anything touching a float goes through f32.
  const c = computeTypeOf(x.dtype, outDtype);
  return runMap(ctx, { name: 'cast', body: 'return x;', inputs: [x], outDtype, inC: c, outC: c, saturate }, x.view.shape);
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

/** Writes src into the view dst of an existing buffer, converting to dst.dtype (shapes already equal). */
export function scatterKernel(ctx: GpuContext, src: GpuOperand, dst: GpuOperand): void {
  const n = numel(src.view.shape);
  if (n === 0) return;
  const [s, d] = coalesceViews([src.view, dst.view]);
  const lanes = lanesPerWord(dst.dtype);
  const c = computeTypeOf(src.dtype, dst.dtype);
  const pipeline = ctx.pipeline(['scatter', src.dtype, dst.dtype].join('|'), () => {
    const bits = 32 / lanes;
    const store =
      lanes === 1
        ? '  out[d] = code;'
        : [
            `  let word = d >> ${Math.log2(lanes)}u;`,
            `  let shift = (d & ${lanes - 1}u) * ${bits}u;`,
            `  atomicAnd(&out[word], ~(${(2 ** bits - 1) >>> 0}u << shift));`,
            `  atomicOr(&out[word], code << shift);`,
          ].join('\n');
    return commonWgsl() + fillTemplate(wgslSource(import.meta.url, 'scatter.wgsl'), {
      OUT_ELEM: lanes === 1 ? 'u32' : 'atomic<u32>',
      FUNCTIONS: loadFn('load0', 'in0', src.dtype, c) + encodeFn('encode_out', dst.dtype, c),
      STORE: store,
      WG,
    });
  });
  ctx.dispatch(pipeline, params(n, [s, d]), [dst.buffer, src.buffer], grid1d(n, WG));
}

/** A buffer of n elements of dtype all holding the storage code `code`. */
export function fillKernel(ctx: GpuContext, dtype: DType, n: number, code: number): GpuBuffer {
  const lanes = lanesPerWord(dtype);
  const out = ctx.alloc(wordBytes(n, lanes));
  const words = Math.ceil(n / lanes);
  if (words === 0) return out;
  let word = 0;
  for (let l = 0; l < lanes; l++) word = (word | (code << (l * (32 / lanes)))) >>> 0;
  const pipeline = ctx.pipeline('fill', () => commonWgsl() + fillTemplate(wgslSource(import.meta.url, 'fill.wgsl'), { FUNCTIONS: '', WG }));
  ctx.dispatch(pipeline, new Uint32Array([words, word]).buffer, [out], grid1d(words, WG));
  return out;
}
