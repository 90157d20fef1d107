import { DTYPE_INFO, lanesPerWord } from '../../core/dtype.js';
import { ShapeError } from '../../core/errors.js';
import { allocStorage } from '../../core/codecs.js';
import { formatShape, numel, type Shape } from '../../core/shape.js';
import type { PadMode } from '../../runtime/backend.js';
import { castCode } from '../../core/codecs.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { RAW_CODES, RAW_ENCODE } from '../gather/webgpu.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';

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

const pad = defineKernel({
  name: 'pad',
  source: 'pad.wgsl',
  // Codes are copied unconverted: the kernel depends on the mode and the lanes a word alone.
  variant: { mode: ['constant', 'replicate', 'reflect'], lanes: 'number' },
  params: {
    n: 'u32',
    rank: 'u32',
    x_off: 'u32',
    fill: 'u32', // the constant's storage code
    out_shape: 'u32[8]',
    in_shape: 'u32[8]',
    strides: 'u32[8]',
    before: 'i32[8]', // negative = crop
  },
  outputs: { out: { packed: (v) => RAW_CODES[v.lanes], helpers: false } },
  inputs: { x: { packed: (v) => RAW_CODES[v.lanes] } },
  grid: { words: 'n', element: 'pad_at' },
  functions: () => RAW_ENCODE,
  code: (v) => ({ OUTSIDE: OUTSIDE[v.mode] }),
});

/** F.pad of a strided view in one dispatch (see Backend.pad); contiguous output of outShape. */
export function padKernel(ctx: GpuContext, x: GpuOperand, before: readonly number[], outShape: Shape, mode: PadMode, value: number): GpuBuffer {
  const rank = outShape.length;
  if (rank > MAX_RANK) throw new ShapeError(`pad: the WebGPU kernel takes at most ${MAX_RANK} dims, got ${formatShape(outShape)}`);
  const n = numel(outShape);
  const lanes = lanesPerWord(x.dtype);
  const out = ctx.alloc(wordBytes(n, lanes));
  if (n === 0) return out;
  pad.run(
    ctx,
    { mode, lanes },
    { n, rank, x_off: x.view.offset, fill: fillBits(x.dtype, value), out_shape: outShape, in_shape: x.view.shape, strides: x.view.strides, before },
    { out, x: x.buffer },
  );
  return out;
}
