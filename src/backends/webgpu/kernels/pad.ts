import { DTYPE_INFO, lanesPerWord } from '../../../core/dtype.js';
import { ShapeError } from '../../../core/errors.js';
import { allocStorage } from '../../../core/codecs.js';
import { formatShape, numel, type Shape } from '../../../core/shape.js';
import type { PadMode } from '../../backend.js';
import { castCode } from '../../cpu/cpu-backend.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';
import { commonWgsl, fillTemplate, grid1d, wgslSource } from './wgsl.js';

const WG = 256;
const MAX_RANK = 8;

// What source() answers for a position outside [0, size): reflect mirrors once (the op checks pad < size).
const OUTSIDE: Record<PadMode, string> = {
  constant: 'return -1;',
  replicate: 'return clamp(i, 0, size - 1);',
  reflect: 'return select(2 * (size - 1) - i, -i, i < 0);',
};

/** The storage code of `value` in dtype, as the bits a kernel writes (a float32 code is its bit pattern). */
function fillBits(dtype: GpuOperand['dtype'], value: number): number {
  const one = allocStorage(dtype, 1);
  one[0] = castCode(value, dtype);
  const bytes = new Uint8Array(one.buffer, 0, DTYPE_INFO[dtype].itemBytes);
  return bytes.reduce((acc, b, i) => acc + b * 2 ** (8 * i), 0);
}

/** F.pad of a strided view in one dispatch (see Backend.pad); contiguous output of outShape. */
export function padKernel(ctx: GpuContext, x: GpuOperand, before: readonly number[], outShape: Shape, mode: PadMode, value: number): GpuBuffer {
  const rank = outShape.length;
  if (rank > MAX_RANK) throw new ShapeError(`pad: the WebGPU kernel takes at most ${MAX_RANK} dims, got ${formatShape(outShape)}`);
  const n = numel(outShape);
  const lanes = lanesPerWord(x.dtype);
  const out = ctx.alloc(wordBytes(n, lanes));
  if (n === 0) return out;
  const bits = 32 / lanes;
  const pipeline = ctx.pipeline(`pad|${mode}|${lanes}`, () =>
    commonWgsl() + fillTemplate(wgslSource(import.meta.url, 'pad.wgsl'), { LANES: lanes, BITS: bits, MASK: (2 ** bits - 1) >>> 0, WG, OUTSIDE: OUTSIDE[mode] }),
  );
  const u = new Uint32Array(36);
  const i = new Int32Array(u.buffer);
  u[0] = n;
  u[1] = rank;
  u[2] = x.view.offset;
  u[3] = fillBits(x.dtype, value);
  for (let d = 0; d < rank; d++) {
    u[4 + d] = outShape[d];
    u[12 + d] = x.view.shape[d];
    u[20 + d] = x.view.strides[d];
    i[28 + d] = before[d];
  }
  ctx.dispatch(pipeline, u.buffer, [out, x.buffer], grid1d(Math.ceil(n / lanes), WG));
  return out;
}
