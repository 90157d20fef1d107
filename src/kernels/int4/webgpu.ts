// Launchers of int4-dequant.wgsl and int4-quantize.wgsl: a packed 4-bit weight dequantized to float32, and a float weight quantized into it.
import type { DType } from '../../core/dtype.js';
import type { GpuBuffer, GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { bytesOf, defineKernel } from '../../runtime/webgpu/kernels/kernel.js';

const dequant = defineKernel({
  name: 'int4_dequant',
  source: 'int4-dequant.wgsl',
  variant: { scale: 'dtype', perm: 'boolean' },
  params: { count: 'u32', k: 'u32', group: 'u32', groups: 'u32', w_off: 'u32', s_off: 'u32', z_off: 'u32', perm_off: 'u32' },
  outputs: { out: 'f32' },
  inputs: {
    words: 'u32',
    scale: { packed: 'scale' },
    zero: { packed: () => 'uint8' as DType },
    perm: { type: 'u32', when: (v) => v.perm },
  },
  grid: { threads: 'count', invoke: 'dequant_at' },
  workgroupSize: 256,
  code: (v) => ({ COLUMN: v.perm ? 'perm[p.perm_off + j]' : 'j' }),
});

const quantize = defineKernel({
  name: 'int4_quantize',
  source: 'int4-quantize.wgsl',
  variant: { x: 'dtype' },
  params: { count: 'u32', k: 'u32', group: 'u32', groups: 'u32', x_off: 'u32' },
  outputs: { words_out: 'u32', scale_out: 'f32', zero_out: 'u32' },
  inputs: { x: { packed: 'x' } },
  grid: { threads: 'count', invoke: 'quantize_group' },
  workgroupSize: 64,
});

export interface Int4Operands {
  readonly words: GpuOperand;
  readonly scale: GpuOperand;
  readonly zero: GpuOperand;
  readonly perm?: GpuOperand;
}

/** rows x k float32 (row-major) from contiguous words [rows, k/8], scale / zero [rows, k/g] and perm [k]. */
export function int4DequantKernel(ctx: GpuContext, w: Int4Operands, rows: number, k: number, group: number): GpuBuffer {
  const out = ctx.alloc(Math.max(4, rows * k * 4));
  if (rows * k === 0) return out;
  dequant.run(
    ctx,
    { scale: w.scale.dtype, perm: !!w.perm },
    {
      count: rows * k,
      k,
      group,
      groups: k / group,
      w_off: w.words.view.offset,
      s_off: w.scale.view.offset,
      z_off: w.zero.view.offset,
      perm_off: w.perm?.view.offset ?? 0,
    },
    { out, words: w.words.buffer, scale: w.scale.buffer, zero: w.zero.buffer, perm: w.perm?.buffer },
    { bytes: (rows * k) / 2 + rows * k * 4 },
  );
  return out;
}

/** A contiguous float x [rows, k] quantized in groups of `group` columns: [words, float32 scale, int32 zero]. */
export function int4QuantizeKernel(ctx: GpuContext, x: GpuOperand, rows: number, k: number, group: number): [GpuBuffer, GpuBuffer, GpuBuffer] {
  const groups = k / group;
  const words = ctx.alloc(Math.max(4, (rows * k) / 2));
  const scale = ctx.alloc(Math.max(4, rows * groups * 4));
  const zero = ctx.alloc(Math.max(4, rows * groups * 4));
  if (rows * k === 0) return [words, scale, zero];
  quantize.run(
    ctx,
    { x: x.dtype },
    { count: rows * groups, k, group, groups, x_off: x.view.offset },
    { words_out: words, scale_out: scale, zero_out: zero, x: x.buffer },
    { bytes: bytesOf(x.dtype, rows * k) + (rows * k) / 2 + rows * groups * 8 },
  );
  return [words, scale, zero];
}
