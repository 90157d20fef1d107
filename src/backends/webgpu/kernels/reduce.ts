import { lanesPerWord, type DType } from '../../../core/dtype.js';
import { numel } from '../../../core/shape.js';
import type { ReduceOp } from '../../backend.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';
import { commonWgsl, computeTypeOf, encodeFn, fillTemplate, grid1d, loadFn, wgslSource, type ComputeType } from './wgsl.js';

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
  const better = op === 'max' || op === 'argmax' ? 'v > a' : 'v < a';
  const take =
    c === 'f32'
      ? `  let an = is_nan(a);\n  let vn = is_nan(v);\n  let take = select(${better} || (v == a && vi < ai), vn && (!an || vi < ai), an || vn);`
      : `  let take = ${better} || (v == a && vi < ai);`;
  return `${take}\n  return select(${pair('a', 'ai')}, ${pair('v', 'vi')}, take);`;
}

function initValue(op: ReduceOp, c: ComputeType): string {
  if (op === 'sum' || op === 'mean') return c === 'f32' ? '0.0' : '0';
  const high = op === 'min' || op === 'argmin';
  if (c === 'f32') return high ? 'f32_bits(0x7f800000u)' : 'f32_bits(0xff800000u)';
  return high ? '2147483647' : '(-2147483647 - 1)';
}

/** Reduces dim `dim` of an input whose view is contiguous (any offset); the output is contiguous without that dim. */
export function reduceKernel(ctx: GpuContext, op: ReduceOp, x: GpuOperand, dim: number, outDtype: DType): GpuBuffer {
  const shape = x.view.shape;
  const size = shape[dim];
  const inner = numel(shape.slice(dim + 1));
  const nOut = numel(shape.filter((_, i) => i !== dim));
  const lanes = lanesPerWord(outDtype);
  const out = ctx.alloc(wordBytes(nOut, lanes));
  if (nOut === 0) return out;
  const c = computeTypeOf(x.dtype);
  const outC: ComputeType = op === 'argmax' || op === 'argmin' ? 'i32' : computeTypeOf(outDtype);
  // Short reduced dims: one invocation per output word (reduce-rows.wgsl); longer ones: a workgroup per output
  // word, sized to the dim (reduce.wgsl).
  const perInvocation = size <= ROWS_MAX_SIZE || (nOut >= ROWS_MANY_OUTPUTS && size <= ROWS_MAX_SIZE_MANY);
  const wg = perInvocation ? 64 : size >= 1024 ? 256 : size >= 128 ? 128 : 64;
  const pipeline = ctx.pipeline(['reduce', perInvocation ? 'rows' : 'wg', op, x.dtype, outDtype, wg].join('|'), () => {
    const [v, i] = perInvocation ? ['acc_v', 'acc_i'] : ['acc_v[0]', 'acc_i[0]'];
    const result = op === 'argmax' || op === 'argmin' ? `i32(${i})` : op === 'mean' ? `${v} / f32(p.size)` : outC === c ? v : `${outC}(${v})`;
    return commonWgsl() + fillTemplate(wgslSource(import.meta.url, perInvocation ? 'reduce-rows.wgsl' : 'reduce.wgsl'), {
      FUNCTIONS: loadFn('load0', 'in0', x.dtype, c) + encodeFn('encode_out', outDtype, outC),
      C: c,
      WG: wg,
      COMBINE: combineBody(op, c),
      INIT: initValue(op, c),
      RESULT: result,
      LANES: lanes,
      BITS: 32 / lanes,
    });
  });
  const words = Math.ceil(nOut / lanes);
  const grid = perInvocation ? grid1d(words, 64) : grid1d(words, 1);
  ctx.dispatch(pipeline, new Uint32Array([nOut, size, inner, x.view.offset]).buffer, [out, x.buffer], grid);
  return out;
}
