// Launcher of index-select.wgsl: one invocation per output word, storage codes copied raw.
import { lanesPerWord } from '../../core/dtype.js';
import { numel } from '../../core/shape.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { RAW_CODES, RAW_ENCODE } from '../gather/webgpu.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { DEVICE_ERROR_WGSL, deviceErrorCode } from '../../runtime/webgpu/kernels/device-error.js';

const indexSelect = defineKernel({
  name: 'index_select',
  source: 'index-select.wgsl',
  // Codes are copied unconverted: the kernel depends on the lanes a word alone.
  variant: { lanes: 'number' },
  params: { n: 'u32', d: 'u32', inner: 'u32', n_idx: 'u32', x_off: 'u32', idx_off: 'u32' },
  outputs: { out: { packed: (v) => RAW_CODES[v.lanes], helpers: false }, err: 'atomic<u32>' },
  inputs: { x: { packed: (v) => RAW_CODES[v.lanes] }, idx: 'u32' },
  grid: { words: 'n', element: 'index_select_at' },
  constants: () => ({ ERR_OP: deviceErrorCode('indexSelect') }),
  functions: () => RAW_ENCODE + DEVICE_ERROR_WGSL,
});

/** x (contiguous view, any offset) indexed along dim by a contiguous int32 index -> contiguous output. */
export function indexSelectKernel(ctx: GpuContext, x: GpuOperand, dim: number, index: GpuOperand): GpuBuffer {
  const shape = x.view.shape;
  const nIdx = numel(index.view.shape);
  const inner = numel(shape.slice(dim + 1));
  const n = numel(shape.slice(0, dim)) * nIdx * inner;
  const lanes = lanesPerWord(x.dtype);
  const out = ctx.alloc(wordBytes(n, lanes));
  if (n === 0) return out;
  indexSelect.run(
    ctx,
    { lanes },
    { n, d: shape[dim], inner, n_idx: nIdx, x_off: x.view.offset, idx_off: index.view.offset },
    { out, err: ctx.deviceErrorFlag(), x: x.buffer, idx: index.buffer },
  );
  return out;
}
