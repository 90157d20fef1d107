// Launcher of scan.wgsl (cumsum): one workgroup per row scanning it in chunks with a running carry, or one
// invocation per row for short rows. The input is read in place through its strides (rank <= 8); the output is
// float32 or int32 (the accumulator), contiguous in x's shape; ops/scan-sort.ts casts a narrower float result.
import { isContiguous, numel } from '../../core/shape.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { withContiguous } from '../../runtime/webgpu/kernels/nn-util.js';
import { computeTypeOf, grid1d } from '../../runtime/webgpu/kernels/wgsl.js';

/** Elements each invocation of a workgroup scans serially per chunk (a chunk is WG * PER elements). */
const PER = 4;
/** Rows up to this length are scanned by one invocation each. */
const ROW_PER_INVOCATION_MAX = 64;
const ROWS_WG = 64;
/** Views of at most this rank are read through their strides (strided_offset's limit). */
const MAX_STRIDED_RANK = 8;

const scan = defineKernel({
  name: 'scan',
  source: 'scan.wgsl',
  variant: { dtype: 'dtype', strided: 'boolean', wg: 'number' },
  params: { rows: 'u32', size: 'u32', inner: 'u32', reverse: 'u32', offset: 'u32', rank: 'u32', shape: 'u32[8]', strides: 'u32[8]' },
  outputs: { out: { packed: (v) => (computeTypeOf(v.dtype) === 'f32' ? 'float32' : 'int32'), compute: (v) => computeTypeOf(v.dtype) } },
  inputs: { x: { packed: 'dtype', compute: (v) => computeTypeOf(v.dtype) } },
  grid: 'custom',
  workgroupSize: (v) => v.wg,
  constants: () => ({ PER }),
  functions: (v) =>
    `alias C = ${computeTypeOf(v.dtype)};\n` +
    `fn src_at(e: u32) -> u32 {\n  return ${v.strided ? 'strided_offset(e, p.offset, p.rank, p.shape, p.strides)' : 'p.offset + e'};\n}\n`,
});

/** Inclusive prefix sums of x along dim (from the end when reverse); contiguous float32 / int32 output. */
export function scanKernel(ctx: GpuContext, x: GpuOperand, dim: number, reverse: boolean): GpuBuffer {
  const shape = x.view.shape;
  const n = numel(shape);
  const out = ctx.alloc(wordBytes(n, 1));
  if (n === 0) return out;
  const size = shape[dim];
  const inner = numel(shape.slice(dim + 1));
  const rows = n / size;
  const run = (src: GpuOperand, strided: boolean) => {
    const p = {
      rows,
      size,
      inner,
      reverse: reverse ? 1 : 0,
      offset: src.view.offset,
      rank: strided ? shape.length : 0,
      shape: strided ? [...shape] : [],
      strides: strided ? [...src.view.strides] : [],
    };
    if (size <= ROW_PER_INVOCATION_MAX) {
      scan.run(ctx, { dtype: src.dtype, strided, wg: ROWS_WG }, p, { out, x: src.buffer }, { threads: rows, entry: 'rows_main' });
    } else {
      // A long row wants every invocation of a big workgroup; a shorter one fewer idle ones.
      const wg = size >= 4096 ? 256 : size >= 512 ? 128 : 32;
      scan.run(ctx, { dtype: src.dtype, strided, wg }, p, { out, x: src.buffer }, { workgroups: grid1d(rows, 1) });
    }
  };
  if (isContiguous(x.view)) run(x, false);
  else if (shape.length <= MAX_STRIDED_RANK && x.view.strides.every((s) => s >= 0)) run(x, true);
  else withContiguous(ctx, x, (c) => run(c, false));
  return out;
}
