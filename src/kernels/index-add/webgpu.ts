// Launcher of indexAdd, the deterministic scatter-add behind indexSelect's backward (an embedding's): index-add-chain
// links equal index values into ordered chains, index-add sums each output row's chain. Three dispatches (a fill
// of the `size` chain heads, the chains, the sums), no float atomics, and the sum order is the index order whatever
// the GPU schedules.
import { lanesPerWord } from '../../core/dtype.js';
import { ShapeError } from '../../core/errors.js';
import { isContiguous, numel } from '../../core/shape.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import { fillKernel, type GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { withContiguous } from '../../runtime/webgpu/kernels/nn-util.js';
import { grid1d } from '../../runtime/webgpu/kernels/wgsl.js';

const CHAIN_WG = 256;

const indexAddChain = defineKernel({
  name: 'index_add_chain',
  source: 'index-add-chain.wgsl',
  params: { t: 'u32', size: 'u32', idx_off: 'u32', idx_stride: 'u32' },
  outputs: { head: 'atomic<u32>', next: 'u32' },
  inputs: { idx: 'i32' },
  grid: 'custom',
  workgroupSize: CHAIN_WG,
});

const indexAdd = defineKernel({
  name: 'index_add',
  source: 'index-add.wgsl',
  variant: { dtype: 'dtype', strided: 'boolean' },
  params: { n: 'u32', t: 'u32', size: 'u32', inner: 'u32', src_off: 'u32', rank: 'u32', shape: 'u32[8]', strides: 'u32[8]' },
  outputs: { out: { packed: () => 'float32' } },
  inputs: { src: { packed: 'dtype' }, head: 'u32', next: 'u32' },
  grid: { words: 'n', element: 'index_add_at' },
  // Storage offset of source element e (row-major over its shape).
  functions: (v) => `fn src_at(e: u32) -> u32 {\n  return ${v.strided ? 'strided_offset(e, p.src_off, p.rank, p.shape, p.strides)' : 'p.src_off + e'};\n}\n`,
});

const indexAddInt64 = defineKernel({
  name: 'index_add_int64',
  source: 'index-add-int64.wgsl',
  params: { n: 'u32', t: 'u32', size: 'u32', inner: 'u32', src_off: 'u32' },
  outputs: { out: 'u32' },
  inputs: { src: 'u32', head: 'u32', next: 'u32' },
  grid: { threads: 'n', invoke: 'index_add_int64_at' },
});

/** Source views of at most this rank are read through their strides in place (strided_offset's limit). */
const MAX_STRIDED_RANK = 8;

/**
 * out float32 [outer, size, inner] (source's shape with `size` at dim) = zeros, then out[.., index[i], ..] +=
 * source[.., i, ..] for i in increasing order. source: any view of a float dtype (read in place up to rank 8), or
 * contiguous int64 (exact int64 sums, int64 out); index: 1-D int32 of source.shape[dim] entries, any stride. Indices
 * outside [0, size) add nothing.
 */
export function indexAddKernel(ctx: GpuContext, source: GpuOperand, dim: number, index: GpuOperand, size: number): GpuBuffer {
  const shape = source.view.shape;
  const t = shape[dim];
  const inner = numel(shape.slice(dim + 1));
  const n = numel(shape.slice(0, dim)) * size * inner;
  const int64 = source.dtype === 'int64';
  if (int64 && !isContiguous(source.view)) throw new ShapeError('indexAdd: an int64 source must be contiguous');
  if (n === 0 || t === 0) return int64 ? fillKernel(ctx, 'int32', 2 * n, 0) : fillKernel(ctx, 'float32', n, 0);
  const idx = { t, size, idx_off: index.view.offset, idx_stride: index.view.strides[0] ?? 0 };
  const head = fillKernel(ctx, 'int32', size, -1);
  const next = ctx.alloc(wordBytes(t, 1));
  try {
    indexAddChain.run(ctx, {}, idx, { head, next, idx: index.buffer }, { workgroups: grid1d(t, CHAIN_WG) });
    if (int64) {
      const out = ctx.alloc(wordBytes(2 * n, 1));
      indexAddInt64.run(ctx, {}, { n, t, size, inner, src_off: source.view.offset }, { out, src: source.buffer, head, next });
      return out;
    }
    const out = ctx.alloc(wordBytes(n, lanesPerWord('float32')));
    const run = (src: GpuOperand, strided: boolean) =>
      indexAdd.run(
        ctx,
        { dtype: src.dtype, strided },
        {
          n,
          t,
          size,
          inner,
          src_off: src.view.offset,
          rank: strided ? shape.length : 0,
          shape: strided ? [...shape] : [],
          strides: strided ? [...src.view.strides] : [],
        },
        { out, src: src.buffer, head, next },
      );
    if (isContiguous(source.view)) run(source, false);
    else if (shape.length <= MAX_STRIDED_RANK) run(source, true);
    else withContiguous(ctx, source, (s) => run(s, false));
    return out;
  } finally {
    ctx.release(head);
    ctx.release(next);
  }
}
