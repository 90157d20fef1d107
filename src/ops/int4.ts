// Packed 4-bit weights (the layout of formats/int4.ts): dequantization to float32 (tests, merges, the backward of
// linear over an int4 weight) and quantization at load (`--dtype int4`), each one dispatch.
import { runKernel } from '../kernels/registry.js';
import { DTypeError, ShapeError } from '../core/errors.js';
import { formatShape } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { cast } from './convert.js';
import { compact } from './shape-ops.js';
import { commonBackend, wrap } from './util.js';

/** A packed 4-bit weight: data int32 [.., N, K/8], scale [.., N, K/g] (float), zero uint8 [.., N, K/g], perm int32 [K] (shared by a stack). */
export interface Int4Tensors {
  readonly data: Tensor;
  readonly scale: Tensor;
  readonly zero: Tensor;
  readonly groupSize: number;
  readonly perm?: Tensor;
}

/** Checks an int4 weight's tensors against each other; returns [rows (all leading dims), N, K]. */
export function checkInt4(op: string, w: Int4Tensors): { lead: number[]; n: number; k: number } {
  const { data, scale, zero, groupSize, perm } = w;
  if (data.dtype !== 'int32' || data.ndim < 2) throw new DTypeError(`${op}: int4 words must be int32 [.., N, K/8], got ${data.describe()}`);
  if (!['float32', 'float16', 'bfloat16'].includes(scale.dtype)) throw new DTypeError(`${op}: int4 scales must be float, got ${scale.describe()}`);
  if (zero.dtype !== 'uint8') throw new DTypeError(`${op}: int4 zero points must be uint8, got ${zero.describe()}`);
  const k = data.shape[data.ndim - 1] * 8;
  const lead = data.shape.slice(0, -1);
  if (!(groupSize > 0 && groupSize % 32 === 0 && k % groupSize === 0))
    throw new ShapeError(`${op}: group size ${groupSize} must be a multiple of 32 dividing K = ${k}`);
  const want = [...lead, k / groupSize].join();
  if (scale.shape.join() !== want || zero.shape.join() !== want)
    throw new ShapeError(
      `${op}: int4 scale ${formatShape(scale.shape)} and zero ${formatShape(zero.shape)} must be [${want}] for words ${formatShape(data.shape)}`,
    );
  // A stack of weights (MoE experts) shares one permutation.
  if (perm && (perm.dtype !== 'int32' || perm.shape.join() !== `${k}`))
    throw new ShapeError(`${op}: an act-order permutation must be int32 [${k}], got ${perm.describe()}`);
  return { lead: lead.slice(0, -1), n: lead[lead.length - 1], k };
}

/** The weight as float32 [.., N, K], columns in activation order. */
export function dequantizeInt4(w: Int4Tensors): Tensor {
  const { lead, n, k } = checkInt4('dequantizeInt4', w);
  const backend = commonBackend('dequantizeInt4', w.data, w.scale, w.zero, ...(w.perm ? [w.perm] : []));
  const parts = [w.data, w.scale, w.zero, ...(w.perm ? [w.perm] : [])].map((t) => compact(t));
  try {
    const [words, scale, zero, perm] = parts.map((t) => t.operand());
    const rows = lead.reduce((a, b) => a * b, n);
    const handle = runKernel('int4Dequant', backend, { w: { words, scale, zero, perm }, rows, k, group: w.groupSize });
    return wrap(backend, handle, 'float32', [...lead, n, k]);
  } finally {
    for (const t of parts) t.dispose();
  }
}

/**
 * A float weight [N, K] quantized to packed 4 bits, affine per group of `groupSize` columns along K (float32 scales,
 * integer zero points 0..15): w ~= (code - zero) * scale.
 */
export function quantizeInt4(x: Tensor, groupSize = 128): Omit<Int4Tensors, 'perm'> {
  if (!['float32', 'float16', 'bfloat16'].includes(x.dtype))
    throw new DTypeError(`quantizeInt4: input must be float32, float16 or bfloat16, got ${x.describe()}`);
  if (x.ndim !== 2) throw new ShapeError(`quantizeInt4: needs a 2-D [N, K] weight, got ${formatShape(x.shape)}`);
  const [n, k] = x.shape;
  if (!(groupSize > 0 && groupSize % 32 === 0 && k % groupSize === 0))
    throw new ShapeError(`quantizeInt4: group size ${groupSize} must be a multiple of 32 dividing K = ${k}`);
  const backend = commonBackend('quantizeInt4', x);
  const [words, scale, zero] = runKernel('int4Quantize', backend, { x: x.operand(), group: groupSize });
  const zero32 = wrap(backend, zero, 'int32', [n, k / groupSize]);
  const zero8 = cast(zero32, 'uint8');
  zero32.dispose();
  return { data: wrap(backend, words, 'int32', [n, k / 8]), scale: wrap(backend, scale, 'float32', [n, k / groupSize]), zero: zero8, groupSize };
}
