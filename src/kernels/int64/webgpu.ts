// Launchers of the int64 kernels: int64 is stored as two u32 words an element (lo, hi) and computed with the 32-bit
// helpers of int64-math.wgsl. Data movement (copies, reads, gathers of rows) never comes here: it runs on the int32
// view of the words (core/dtype.ts int64WordView).
import { int64WordView, isFloating, type DType } from '../../core/dtype.js';
import { ShapeError } from '../../core/errors.js';
import { coalesceViews, contiguousView, formatShape, isContiguous, numel, type Shape, type View } from '../../core/shape.js';
import type { ComparisonOp } from '../../runtime/backend.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import { castKernel, type GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { deviceErrorCode, ZERO_DIVISOR_WGSL } from '../../runtime/webgpu/kernels/device-error.js';
import { withContiguous } from '../../runtime/webgpu/kernels/nn-util.js';
import { wgslSource } from '../../runtime/webgpu/kernels/wgsl.js';
import type { Int64MapOp, Int64RowsOp } from './cpu.js';

const MAX_RANK = 8;
const MATH = () => wgslSource('int64-math.wgsl');

const MAP_OPS: Record<Int64MapOp, string> = {
  add: 'i64_add(a, b)',
  sub: 'i64_sub(a, b)',
  mul: 'i64_mul(a, b)',
  maximum: 'select(a, b, i64_lt(a, b))',
  minimum: 'select(a, b, i64_lt(b, a))',
  neg: 'i64_neg(a)',
  abs: 'select(a, i64_neg(a), bitcast<i32>(a.y) < 0)',
  // A zero divisor gives 0 and is reported (nonzero_i64), so the read back raises ZeroDivisionError.
  floor_divide: `i64_divide(a, nonzero_i64(b, ${deviceErrorCode('floor_divide')}u), true, false)`,
  remainder: `i64_divide(a, nonzero_i64(b, ${deviceErrorCode('remainder')}u), true, true)`,
  fmod: `i64_divide(a, nonzero_i64(b, ${deviceErrorCode('fmod')}u), false, true)`,
  pow: 'i64_pow(a, b)',
};

/** The int64 ops that divide: they bind the device error flag. */
const divides = (op: Int64MapOp) => op === 'floor_divide' || op === 'remainder' || op === 'fmod';

const COMPARE_OPS: Record<ComparisonOp, string> = {
  eq: 'i64_eq(a, b)',
  ne: '!i64_eq(a, b)',
  lt: 'i64_lt(a, b)',
  le: '!i64_lt(b, a)',
  gt: 'i64_lt(b, a)',
  ge: '!i64_lt(a, b)',
};

const VIEW_PARAMS = {
  n: 'u32',
  rank: 'u32',
  a_off: 'u32',
  b_off: 'u32',
  s_lo: 'u32',
  s_hi: 'u32',
  shape: 'u32[8]',
  a_strides: 'i32[8]',
  b_strides: 'i32[8]',
} as const;

/** Which side of a binary op is a number (its words in the params: a number needs no buffer, so no upload). */
export type Int64ScalarSide = 'none' | 'a' | 'b';
const SCALAR_SIDES: Int64ScalarSide[] = ['none', 'a', 'b'];

/** The A and B loads of int64-map / int64-compare: a buffer element, or the number in the params. */
function sideLoads(scalar: Int64ScalarSide) {
  const load = (side: 'a' | 'b') =>
    scalar === side ? 'vec2<u32>(p.s_lo, p.s_hi)' : `vec2<u32>(${side}_words[2u * i${side}], ${side}_words[2u * i${side} + 1u])`;
  return { A: load('a'), B: load('b') };
}

const int64Map = defineKernel({
  name: 'int64_map',
  source: 'int64-map.wgsl',
  variant: { op: Object.keys(MAP_OPS) as Int64MapOp[], scalar: SCALAR_SIDES },
  params: VIEW_PARAMS,
  outputs: { out: 'u32', err: { type: 'atomic<u32>', when: (v) => divides(v.op) } },
  inputs: { a_words: 'u32', b_words: 'u32' },
  grid: { threads: 'n', invoke: 'int64_map_at' },
  functions: (v) => (divides(v.op) ? ZERO_DIVISOR_WGSL : '') + MATH(),
  code: (v) => ({ OP: MAP_OPS[v.op], ...sideLoads(v.scalar) }),
});

const int64Compare = defineKernel({
  name: 'int64_compare',
  source: 'int64-compare.wgsl',
  variant: { op: Object.keys(COMPARE_OPS) as ComparisonOp[], scalar: SCALAR_SIDES },
  params: VIEW_PARAMS,
  outputs: { out: { packed: () => 'bool', compute: 'i32' } },
  inputs: { a_words: 'u32', b_words: 'u32' },
  grid: { words: 'n', element: 'int64_compare_at' },
  functions: MATH,
  code: (v) => ({ OP: COMPARE_OPS[v.op], ...sideLoads(v.scalar) }),
});

const int64From = defineKernel({
  name: 'int64_from',
  source: 'int64-from.wgsl',
  variant: { dtype: 'dtype' },
  params: { n: 'u32', x_off: 'u32' },
  outputs: { out: 'u32' },
  inputs: { x: { packed: 'dtype', compute: (v) => (isFloating(v.dtype) ? 'f32' : 'i32') } },
  grid: { threads: 'n', invoke: 'int64_from_at' },
  functions: MATH,
  code: (v) => ({ CONVERT: isFloating(v.dtype) ? 'i64_from_f32(load_x(p.x_off + i))' : 'i64_from_i32(load_x(p.x_off + i))' }),
});

const TO_CONVERT: Record<string, string> = {
  float: 'i64_to_f32(a)',
  int32: 'bitcast<i32>(a.x)',
  index: 'select(i32(-2147483647 - 1), bitcast<i32>(a.x), a.y == select(0u, 0xffffffffu, bitcast<i32>(a.x) < 0))',
  uint8: 'i32(a.x & 0xffu)',
  bool: 'select(0, 1, (a.x | a.y) != 0u)',
};

const int64To = defineKernel({
  name: 'int64_to',
  source: 'int64-to.wgsl',
  variant: { dtype: 'dtype', index: 'boolean' },
  params: { n: 'u32', x_off: 'u32' },
  outputs: { out: { packed: 'dtype', compute: (v) => (isFloating(v.dtype) ? 'f32' : 'i32') } },
  inputs: { x: 'u32' },
  grid: { words: 'n', element: 'int64_to_at' },
  functions: MATH,
  code: (v) => ({
    C: isFloating(v.dtype) ? 'f32' : 'i32',
    CONVERT: TO_CONVERT[v.index ? 'index' : isFloating(v.dtype) ? 'float' : v.dtype],
  }),
});

const FIRST = 'vec2<u32>(x[2u * base], x[2u * base + 1u])';
const WRITE_ACC = 'out[2u * r] = acc.x;\n  out[2u * r + 1u] = acc.y;';
const WRITE_BEST = 'out[2u * r] = best;\n  out[2u * r + 1u] = 0u;';
const KEEP = (cond: string) => `if (${cond}) {\n      acc = v;\n      best = j;\n    }`;

const ROWS_CODE: Record<Int64RowsOp, { INIT: string; START: string; STEP: string; END: string }> = {
  scan: {
    INIT: 'vec2<u32>(0u, 0u)',
    START: '0u',
    STEP: 'acc = i64_add(acc, v);\n    out[2u * k - 2u * p.x_off] = acc.x;\n    out[2u * k - 2u * p.x_off + 1u] = acc.y;',
    END: '',
  },
  prod: { INIT: 'vec2<u32>(1u, 0u)', START: '0u', STEP: 'acc = i64_mul(acc, v);', END: WRITE_ACC },
  max: { INIT: FIRST, START: '1u', STEP: KEEP('i64_lt(acc, v)'), END: WRITE_ACC },
  min: { INIT: FIRST, START: '1u', STEP: KEEP('i64_lt(v, acc)'), END: WRITE_ACC },
  argmax: { INIT: FIRST, START: '1u', STEP: KEEP('i64_lt(acc, v)'), END: WRITE_BEST },
  argmin: { INIT: FIRST, START: '1u', STEP: KEEP('i64_lt(v, acc)'), END: WRITE_BEST },
};

const int64Rows = defineKernel({
  name: 'int64_rows',
  source: 'int64-rows.wgsl',
  variant: { op: Object.keys(ROWS_CODE) as Int64RowsOp[] },
  params: { n: 'u32', len: 'u32', x_off: 'u32' },
  outputs: { out: 'u32' },
  inputs: { x: 'u32' },
  grid: { threads: 'n', invoke: 'int64_rows_at' },
  functions: MATH,
  code: (v) => ROWS_CODE[v.op],
});

/** A contiguous copy of an int64 view (the int32 copy of its words). */
export function int64Contiguous(ctx: GpuContext, x: GpuOperand): GpuBuffer {
  return castKernel(ctx, { buffer: x.buffer, dtype: 'int32', view: int64WordView(x.view) }, 'int32', false);
}

/** Runs kernel on x (int64), or on a contiguous copy of it when x is strided. */
export function withContiguousInt64<R>(ctx: GpuContext, x: GpuOperand, kernel: (x: GpuOperand) => R): R {
  if (isContiguous(x.view)) return kernel(x);
  const compact = int64Contiguous(ctx, x);
  try {
    return kernel({ buffer: compact, dtype: 'int64', view: contiguousView(x.view.shape) });
  } finally {
    ctx.release(compact);
  }
}

function viewParams(shape: Shape, a: View, b: View, n: number, value: bigint) {
  const [va, vb] = coalesceViews([a, b]);
  if (va.shape.length > MAX_RANK) throw new ShapeError(`int64 kernels index at most ${MAX_RANK} non-mergeable dims, got shape ${formatShape(shape)}`);
  const pad = (xs: readonly number[]) => [...xs, ...new Array<number>(MAX_RANK - xs.length).fill(0)];
  const dims = va.shape.length;
  return {
    n,
    rank: dims,
    a_off: va.offset,
    b_off: vb.offset,
    s_lo: Number(BigInt.asUintN(32, value)),
    s_hi: Number(BigInt.asUintN(32, value >> 32n)),
    shape: pad(dims ? va.shape : []).map((s, i) => (i < dims ? s : 1)),
    a_strides: pad(va.strides),
    b_strides: pad(vb.strides),
  };
}

/**
 * op over int64 views a, b already broadcast to shape: an int64 result, or bool for a comparison. With `scalar` a
 * side, that side is the number `value` (its operand is only bound, never read).
 */
export function int64BinaryKernel(
  ctx: GpuContext,
  op: Int64MapOp | ComparisonOp,
  a: GpuOperand,
  b: GpuOperand,
  shape: Shape,
  scalar: Int64ScalarSide = 'none',
  value = 0n,
): GpuBuffer {
  const n = numel(shape);
  const compare = op in COMPARE_OPS;
  const out = ctx.alloc(compare ? wordBytes(n, 4) : Math.max(4, 8 * n));
  if (n === 0) return out;
  const params = viewParams(shape, a.view, b.view, n, value);
  if (compare) int64Compare.run(ctx, { op: op as ComparisonOp, scalar }, params, { out, a_words: a.buffer, b_words: b.buffer });
  else {
    const err = divides(op as Int64MapOp) ? ctx.deviceErrorFlag() : undefined;
    int64Map.run(ctx, { op: op as Int64MapOp, scalar }, params, { out, err, a_words: a.buffer, b_words: b.buffer });
  }
  return out;
}

/** A contiguous copy of x converted from or to int64 (`index`: int64 -> int32 with INT32_MIN out of range). */
export function int64CastKernel(ctx: GpuContext, x: GpuOperand, to: DType, index: boolean): GpuBuffer {
  const n = numel(x.view.shape);
  if (x.dtype === 'int64' && to === 'int64') return int64Contiguous(ctx, x);
  if (to === 'int64') {
    return withContiguous(ctx, x, (cx) => {
      const out = ctx.alloc(Math.max(4, 8 * n));
      if (n > 0) int64From.run(ctx, { dtype: cx.dtype }, { n, x_off: cx.view.offset }, { out, x: cx.buffer });
      return out;
    });
  }
  return withContiguousInt64(ctx, x, (cx) => {
    const out = ctx.alloc(wordBytes(n, 4 / (index ? 4 : bytesPerElement(to))));
    if (n > 0) int64To.run(ctx, { dtype: index ? 'int32' : to, index }, { n, x_off: cx.view.offset }, { out, x: cx.buffer });
    return out;
  });
}

function bytesPerElement(dtype: DType): number {
  return dtype === 'float32' || dtype === 'int32' ? 4 : dtype === 'float16' || dtype === 'bfloat16' ? 2 : 1;
}

/** op along the last dim of x viewed as [rows, len] (Int64RowsOp); contiguous int64 output. */
export function int64RowsKernel(ctx: GpuContext, x: GpuOperand, rows: number, len: number, op: Int64RowsOp): GpuBuffer {
  return withContiguousInt64(ctx, x, (cx) => {
    const out = ctx.alloc(Math.max(4, 8 * (op === 'scan' ? rows * len : rows)));
    if (rows > 0) int64Rows.run(ctx, { op }, { n: rows, len, x_off: cx.view.offset }, { out, x: cx.buffer });
    return out;
  });
}
