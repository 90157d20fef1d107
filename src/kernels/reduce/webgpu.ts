import { lanesPerWord, type DType } from '../../core/dtype.js';
import { numel } from '../../core/shape.js';
import type { ReduceOp } from '../../runtime/backend.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { computeTypeOf, grid1d, workgroupReduce, type ComputeType } from '../../runtime/webgpu/kernels/wgsl.js';

/** Reduced dims up to this length are folded serially by one invocation per output word... */
const ROWS_MAX_SIZE = 64;
/**
 * ...and up to this length when there are at least ROWS_MANY_OUTPUTS outputs: the outputs alone then fill the
 * device, and a workgroup per short row would spend its time in barriers (quantize's 128-wide block amax).
 */
const ROWS_MAX_SIZE_MANY = 1024;
const ROWS_MANY_OUTPUTS = 4096;

function combineBody(op: ReduceOp, c: ComputeType): string {
  const pair = (v: string, i: string) => `vec2<u32>(bitcast<u32>(${v}), ${i})`;
  if (op === 'sum' || op === 'mean') return `  return ${pair('a + v', '0u')};`;
  if (op === 'prod') return `  return ${pair('a * v', '0u')};`;
  const better = op === 'max' || op === 'argmax' ? 'v > a' : 'v < a';
  const take =
    c === 'f32'
      ? `  let an = is_nan(a);\n  let vn = is_nan(v);\n  let take = select(${better} || (v == a && vi < ai), vn && (!an || vi < ai), an || vn);`
      : `  let take = ${better} || (v == a && vi < ai);`;
  return `${take}\n  return select(${pair('a', 'ai')}, ${pair('v', 'vi')}, take);`;
}

function initValue(op: ReduceOp, c: ComputeType): string {
  if (op === 'sum' || op === 'mean') return c === 'f32' ? '0.0' : '0';
  if (op === 'prod') return c === 'f32' ? '1.0' : '1';
  const high = op === 'min' || op === 'argmin';
  if (c === 'f32') return high ? 'f32_bits(0x7f800000u)' : 'f32_bits(0xff800000u)';
  return high ? '2147483647' : '(-2147483647 - 1)';
}

export const REDUCE_OPS = ['sum', 'mean', 'max', 'min', 'argmax', 'argmin', 'prod'] as const satisfies readonly ReduceOp[];
const OPS = REDUCE_OPS;

interface ReduceVariant {
  readonly op: ReduceOp;
  readonly dtype: DType;
  readonly outDtype: DType;
}

/** The compute type of the result: argmax/argmin give int32 indices. */
export function reduceResultType(v: ReduceVariant): ComputeType {
  return v.op === 'argmax' || v.op === 'argmin' ? 'i32' : computeTypeOf(v.outDtype);
}

/** C (the input's compute type) and R (the result's), the types the bodies are written in. */
export function reduceTypeAliases(v: ReduceVariant): string {
  return `alias C = ${computeTypeOf(v.dtype)};\nalias R = ${reduceResultType(v)};\n`;
}

/** The bodies' code: the combine step, the start value and the result from the winner (acc: its value and index). */
export function reduceBodyCode(v: ReduceVariant, acc: { v: string; i: string }): Record<string, string> {
  const c = computeTypeOf(v.dtype);
  const result =
    v.op === 'argmax' || v.op === 'argmin'
      ? `i32(${acc.i})`
      : v.op === 'mean'
        ? `${acc.v} / f32(p.size)`
        : reduceResultType(v) === c
          ? acc.v
          : `${reduceResultType(v)}(${acc.v})`;
  return { COMBINE: combineBody(v.op, c), INIT: initValue(v.op, c), RESULT: result };
}

export const REDUCE_PARAMS = { n_out: 'u32', size: 'u32', inner: 'u32', offset: 'u32' } as const;
const params = REDUCE_PARAMS;

/** Short reduced dims: one invocation per output word folds its lanes' rows serially. */
const reduceRows = defineKernel({
  name: 'reduce',
  source: 'reduce-rows.wgsl',
  variant: { layout: ['rows'], op: OPS, dtype: 'dtype', outDtype: 'dtype' },
  params,
  outputs: { out: { packed: 'outDtype', compute: reduceResultType } },
  inputs: { x: { packed: 'dtype', compute: (v) => computeTypeOf(v.dtype) } },
  grid: { words: 'n_out', element: 'reduce_at' },
  workgroupSize: 64,
  functions: reduceTypeAliases,
  code: (v) => reduceBodyCode(v, { v: 'acc_v', i: 'acc_i' }),
});

/** Longer ones: a workgroup per output word, sized to the dim. */
const reduceWorkgroups = defineKernel({
  name: 'reduce',
  source: 'reduce.wgsl',
  variant: { layout: ['wg'], op: OPS, dtype: 'dtype', outDtype: 'dtype', wg: 'number' },
  params,
  outputs: { out: { packed: 'outDtype', compute: reduceResultType } },
  inputs: { x: { packed: 'dtype', compute: (v) => computeTypeOf(v.dtype) } },
  grid: 'custom',
  workgroupSize: (v) => v.wg,
  constants: (v) => ({ LANES: lanesPerWord(v.outDtype), BITS: 32 / lanesPerWord(v.outDtype) }),
  // 'reusable': the next output of the word refills the scratch right after.
  functions: (v) => reduceTypeAliases(v) + reduceWorkgroupFunctions(),
  code: (v) => reduceBodyCode(v, { v: 'bitcast<C>(best.x)', i: 'best.y' }),
});

/** The workgroup kernel's tree over (value bits, index) pairs. */
export function reduceWorkgroupFunctions(): string {
  return workgroupReduce({ name: 'reduce_pair', type: 'vec2<u32>', combine: 'combine(bitcast<C>(a.x), a.y, bitcast<C>(b.x), b.y)', result: 'reusable' });
}

/** Which kernel reduces `size` long rows into nOut outputs: serial folds per output word, or a workgroup per word. */
export function reduceLayout(size: number, nOut: number): { kind: 'rows' } | { kind: 'wg'; wg: number } {
  if (size <= ROWS_MAX_SIZE || (nOut >= ROWS_MANY_OUTPUTS && size <= ROWS_MAX_SIZE_MANY)) return { kind: 'rows' };
  return { kind: 'wg', wg: size >= 1024 ? 256 : size >= 128 ? 128 : 64 };
}

/** A reduction of dim of a contiguous shape as [outer, size, inner], and its output count. */
export function reduceGeometry(shape: readonly number[], dim: number): { size: number; inner: number; nOut: number } {
  return { size: shape[dim], inner: numel(shape.slice(dim + 1)), nOut: numel(shape.filter((_, i) => i !== dim)) };
}

/** Reduces dim `dim` of an input whose view is contiguous (any offset); the output is contiguous without that dim. */
export function reduceKernel(ctx: GpuContext, op: ReduceOp, x: GpuOperand, dim: number, outDtype: DType): GpuBuffer {
  const { size, inner, nOut } = reduceGeometry(x.view.shape, dim);
  const lanes = lanesPerWord(outDtype);
  const out = ctx.alloc(wordBytes(nOut, lanes));
  if (nOut === 0) return out;
  const p = { n_out: nOut, size, inner, offset: x.view.offset };
  const layout = reduceLayout(size, nOut);
  if (layout.kind === 'rows') reduceRows.run(ctx, { layout: 'rows', op, dtype: x.dtype, outDtype }, p, { out, x: x.buffer });
  else
    reduceWorkgroups.run(
      ctx,
      { layout: 'wg', op, dtype: x.dtype, outDtype, wg: layout.wg },
      p,
      { out, x: x.buffer },
      { workgroups: grid1d(Math.ceil(nOut / lanes), 1) },
    );
  return out;
}
