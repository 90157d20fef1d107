// Launcher of gather.wgsl: one invocation per output word, storage codes copied raw; x and index read through their
// strides.
import { lanesPerWord, type DType } from '../../core/dtype.js';
import { ShapeError } from '../../core/errors.js';
import { numel } from '../../core/shape.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { DEVICE_ERROR_WGSL, deviceErrorCode } from '../../runtime/webgpu/kernels/device-error.js';

/**
 * A dtype of each code width, for kernels that copy storage codes unconverted (gather, index_select, pad): they
 * depend on the lanes a word alone, so their variant holds the lanes and their bindings pack this stand-in.
 */
export const RAW_CODES: Readonly<Record<number, DType>> = { 1: 'int32', 2: 'float16', 4: 'uint8' };
/** The identity encode_out of such a kernel's output (its element function returns codes). */
export const RAW_ENCODE = 'fn encode_out(code: u32) -> u32 {\n  return code;\n}\n';

const gather = defineKernel({
  name: 'gather',
  source: 'gather.wgsl',
  variant: { lanes: 'number' },
  params: {
    n: 'u32',
    rank: 'u32',
    x_off: 'u32',
    idx_off: 'u32',
    shape: 'u32[8]',
    x_strides: 'u32[8]',
    idx_strides: 'u32[8]',
    dim_size: 'u32',
    dim_stride: 'u32',
  },
  outputs: { out: { packed: (v) => RAW_CODES[v.lanes], helpers: false }, err: 'atomic<u32>' },
  inputs: { x: { packed: (v) => RAW_CODES[v.lanes] }, idx: 'u32' },
  grid: { words: 'n', element: 'gather_at' },
  constants: () => ({ ERR_OP: deviceErrorCode('gather') }),
  functions: () => RAW_ENCODE + DEVICE_ERROR_WGSL,
});

/** x.gather(dim, index) for any dtype and strided views; index int32 of x's rank. Contiguous output. */
export function gatherKernel(ctx: GpuContext, x: GpuOperand, dim: number, index: GpuOperand): GpuBuffer {
  const shape = index.view.shape;
  const rank = shape.length;
  if (rank > 8) throw new ShapeError(`gather supports at most 8 dims, got ${rank}`);
  const n = numel(shape);
  const lanes = lanesPerWord(x.dtype);
  const out = ctx.alloc(wordBytes(n, lanes));
  if (n === 0) return out;
  gather.run(
    ctx,
    { lanes },
    {
      n,
      rank,
      x_off: x.view.offset,
      idx_off: index.view.offset,
      shape,
      x_strides: x.view.strides.map((s, d) => (d === dim ? 0 : s)),
      idx_strides: index.view.strides,
      dim_size: x.view.shape[dim],
      dim_stride: x.view.strides[dim],
    },
    { out, err: ctx.deviceErrorFlag(), x: x.buffer, idx: index.buffer },
  );
  return out;
}
