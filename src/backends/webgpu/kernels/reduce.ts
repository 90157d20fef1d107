import { lanesPerWord, type DType } from '../../../core/dtype.js';
import { numel } from '../../../core/shape.js';
import type { ReduceOp } from '../../backend.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';
import { commonWgsl, computeTypeOf, encodeFn, fillTemplate, grid1d, loadFn, wgslSource, type ComputeType } from './wgsl.js';

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
  // Small reduced dims waste fewer idle invocations with a smaller workgroup.
  const wg = size >= 1024 ? 256 : size >= 128 ? 128 : 64;
  const pipeline = ctx.pipeline(['reduce', op, x.dtype, outDtype, wg].join('|'), () => {
    const result =
      op === 'argmax' || op === 'argmin' ? 'i32(acc_i[0])' : op === 'mean' ? 'acc_v[0] / f32(p.size)' : outC === c ? 'acc_v[0]' : `${outC}(acc_v[0])`;
    return commonWgsl() + fillTemplate(wgslSource(import.meta.url, 'reduce.wgsl'), {
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
  ctx.dispatch(pipeline, new Uint32Array([nOut, size, inner, x.view.offset]).buffer, [out, x.buffer], grid1d(words, 1));
  return out;
}
