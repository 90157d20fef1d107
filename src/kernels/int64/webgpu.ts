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
import { withContiguous } from '../../runtime/webgpu/kernels/nn-util.js';
import { wgslSource } from '../../runtime/webgpu/kernels/wgsl.js';
import type { Int64MapOp } from './cpu.js';

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
};

const COMPARE_OPS: Record<ComparisonOp, string> = {
  eq: 'i64_eq(a, b)',
  ne: '!i64_eq(a, b)',
  lt: 'i64_lt(a, b)',
  le: '!i64_lt(b, a)',
  gt: 'i64_lt(b, a)',
  ge: '!i64_lt(a, b)',
};

const VIEW_PARAMS = { n: 'u32', rank: 'u32', a_off: 'u32', b_off: 'u32', shape: 'u32[8]', a_strides: 'i32[8]', b_strides: 'i32[8]' } as const;

const int64Map = defineKernel({
  name: 'int64_map',
  source: 'int64-map.wgsl',
  variant: { op: Object.keys(MAP_OPS) as Int64MapOp[] },
  params: VIEW_PARAMS,
  outputs: { out: 'u32' },
  inputs: { a_words: 'u32', b_words: 'u32' },
  grid: { threads: 'n', invoke: 'int64_map_at' },
  functions: MATH,
  code: (v) => ({ OP: MAP_OPS[v.op] }),
});

const int64Compare = defineKernel({
  name: 'int64_compare',
  source: 'int64-compare.wgsl',
  variant: { op: Object.keys(COMPARE_OPS) as ComparisonOp[] },
  params: VIEW_PARAMS,
  outputs: { out: { packed: () => 'bool', compute: 'i32' } },
  inputs: { a_words: 'u32', b_words: 'u32' },
  grid: { words: 'n', element: 'int64_compare_at' },
  functions: MATH,
  code: (v) => ({ OP: COMPARE_OPS[v.op] }),
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

const int64Rows = defineKernel({
  name: 'int64_rows',
  source: 'int64-rows.wgsl',
  variant: { scan: 'boolean' },
  params: { n: 'u32', len: 'u32', x_off: 'u32' },
  outputs: { out: 'u32' },
  inputs: { x: 'u32' },
  grid: { threads: 'n', invoke: 'int64_rows_at' },
  functions: MATH,
  code: (v) => ({
    EACH: v.scan ? 'let o = r * p.len + j;\n    out[2u * o] = acc.x;\n    out[2u * o + 1u] = acc.y;' : '',
    END: v.scan ? '' : 'out[2u * r] = acc.x;\n  out[2u * r + 1u] = acc.y;',
  }),
});

/** A contiguous copy of an int64 view (the int32 copy of its words). */
export function int64Contiguous(ctx: GpuContext, x: GpuOperand): GpuBuffer {
  return castKernel(ctx, { buffer: x.buffer, dtype: 'int32', view: int64WordView(x.view) }, 'int32', false);
}

/** Runs kernel on x (int64), or on a contiguous copy of it when x is strided. */
function withContiguousInt64<R>(ctx: GpuContext, x: GpuOperand, kernel: (x: GpuOperand) => R): R {
  if (isContiguous(x.view)) return kernel(x);
  const compact = int64Contiguous(ctx, x);
  try {
    return kernel({ buffer: compact, dtype: 'int64', view: contiguousView(x.view.shape) });
  } finally {
    ctx.release(compact);
  }
}

function viewParams(shape: Shape, a: View, b: View, n: number) {
  const [va, vb] = coalesceViews([a, b]);
  if (va.shape.length > MAX_RANK) throw new ShapeError(`int64 kernels index at most ${MAX_RANK} non-mergeable dims, got shape ${formatShape(shape)}`);
  const pad = (xs: readonly number[]) => [...xs, ...new Array<number>(MAX_RANK - xs.length).fill(0)];
  const dims = va.shape.length;
  return {
    n,
    rank: dims,
    a_off: va.offset,
    b_off: vb.offset,
    shape: pad(dims ? va.shape : []).map((s, i) => (i < dims ? s : 1)),
    a_strides: pad(va.strides),
    b_strides: pad(vb.strides),
  };
}

/** op over int64 views a, b already broadcast to shape: an int64 result, or bool for a comparison. */
export function int64BinaryKernel(ctx: GpuContext, op: Int64MapOp | ComparisonOp, a: GpuOperand, b: GpuOperand, shape: Shape): GpuBuffer {
  const n = numel(shape);
  const compare = op in COMPARE_OPS;
  const out = ctx.alloc(compare ? wordBytes(n, 4) : Math.max(4, 8 * n));
  if (n === 0) return out;
  const params = viewParams(shape, a.view, b.view, n);
  if (compare) int64Compare.run(ctx, { op: op as ComparisonOp }, params, { out, a_words: a.buffer, b_words: b.buffer });
  else int64Map.run(ctx, { op: op as Int64MapOp }, params, { out, a_words: a.buffer, b_words: b.buffer });
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

/** Sums (scan: running sums) along the last dim of x viewed as [rows, len]; contiguous int64 output. */
export function int64RowsKernel(ctx: GpuContext, x: GpuOperand, rows: number, len: number, scan: boolean): GpuBuffer {
  return withContiguousInt64(ctx, x, (cx) => {
    const out = ctx.alloc(Math.max(4, 8 * (scan ? rows * len : rows)));
    if (rows > 0) int64Rows.run(ctx, { scan }, { n: rows, len, x_off: cx.view.offset }, { out, x: cx.buffer });
    return out;
  });
}
