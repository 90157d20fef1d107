// Launcher of the row sort (sort.wgsl, sort-merge.wgsl): a bitonic network over each row padded to P = 2^m pairs of
// (key, index). Rows up to the block B (2048 on GPUs, 512 on software adapters) are sorted by one workgroup each in
// workgroup memory, in one dispatch. Longer rows: blocks of B are sorted in workgroup memory, then each later stage k runs its steps
// with j >= B in global memory (one dispatch a step) and the rest in workgroup memory (one dispatch):
// log2(P / B) * (log2(P / B) + 3) / 2 + 1 dispatches, 28 for a row of 128256 with B = 2048.
import { isContiguous, numel } from '../../core/shape.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { pow2AtLeast, withContiguous } from '../../runtime/webgpu/kernels/nn-util.js';
import { computeTypeOf, grid1d } from '../../runtime/webgpu/kernels/wgsl.js';
import { softmaxPolicyName, type SoftmaxPolicyName } from '../softmax/webgpu.js';

/**
 * Pairs a workgroup sorts in its memory: 8 bytes each, at most 16 KiB (2048), WebGPU's default
 * maxComputeWorkgroupStorageSize (the limit requirements.ts asks every adapter for).
 */
export const BLOCK_MAX = 2048;
/** Overrides for tests and benchmarks (undefined: the adapter's policy). */
export const sortTuning = { maxWorkgroupSize: undefined as number | undefined, block: undefined as number | undefined };
/**
 * Invocations of a block's workgroup by adapter policy (softmax's, by adapter kind). SwiftShader switches between
 * every group of 4 invocations at each barrier: on [64, 2048] rows 16 invocations took 163 ms, 64 took 546 and 256
 * took 1092 (warm); a GPU wants the block's pairs spread over many lanes.
 */
const SORT_WORKGROUP: Readonly<Record<SoftmaxPolicyName, number>> = { gpu: 256, software: 16 };
/**
 * The block by adapter policy. SwiftShader compiles a kernel in time that grows with its workgroup memory
 * (measured about 0.5 s for 512 pairs, 2.5 s for 2048, per pipeline): there, more of a long row's steps run
 * in global memory instead.
 */
const SORT_BLOCK: Readonly<Record<SoftmaxPolicyName, number>> = { gpu: BLOCK_MAX, software: 512 };
const MERGE_WG = 256;
/** Views of at most this rank are read through their strides (strided_offset's limit). */
const MAX_STRIDED_RANK = 8;

/** The sort key of a value: unsigned order = torch's ascending order (NaN last, -0 == +0); p.flip inverts it. */
function keyFunction(dtype: GpuOperand['dtype']): string {
  if (computeTypeOf(dtype) === 'i32') return 'fn key_of(v: i32) -> u32 {\n  return (bitcast<u32>(v) ^ 0x80000000u) ^ p.flip;\n}\n';
  return [
    'fn key_of(v: f32) -> u32 {',
    '  let b = bitcast<u32>(v);',
    '  var k = select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);',
    '  if ((b & 0x7fffffffu) == 0u) {',
    '    k = 0x80000000u;',
    '  }',
    '  if (is_nan(v)) {',
    '    k = 0xffffffffu;',
    '  }',
    '  return k ^ p.flip;',
    '}',
    '',
  ].join('\n');
}

const sortBlock = defineKernel({
  name: 'sort_block',
  source: 'sort.wgsl',
  // from: where the block's pairs come from (x: a first sort; scratch: a later stage); final: it writes `out`.
  variant: { dtype: 'dtype', strided: 'boolean', capacity: 'number', wg: 'number', from: ['x', 'scratch'], final: 'boolean' },
  params: {
    rows: 'u32',
    n: 'u32',
    inner: 'u32',
    out_count: 'u32',
    p2: 'u32',
    block: 'u32',
    k: 'u32',
    flip: 'u32',
    offset: 'u32',
    rank: 'u32',
    shape: 'u32[8]',
    strides: 'u32[8]',
  },
  outputs: {
    out: { type: 'u32', when: (v) => v.final },
    keys: { type: 'u32', when: (v) => v.from === 'scratch' || !v.final },
    ids: { type: 'u32', when: (v) => v.from === 'scratch' || !v.final },
  },
  inputs: { x: { packed: 'dtype', compute: (v) => computeTypeOf(v.dtype), when: (v) => v.from === 'x' } },
  grid: 'custom',
  workgroupSize: (v) => v.wg,
  constants: (v) => ({ CAPACITY: v.capacity }),
  functions: (v) =>
    v.from === 'x'
      ? `fn src_at(e: u32) -> u32 {\n  return ${v.strided ? 'strided_offset(e, p.offset, p.rank, p.shape, p.strides)' : 'p.offset + e'};\n}\n` +
        keyFunction(v.dtype)
      : '',
  code: (v) => ({
    LOAD:
      v.from === 'x'
        ? [
            '    var key = PAD;',
            '    var id = PAD;',
            '    if (j < p.n) {',
            '      key = key_of(load_x(src_at(row_element(row, j, p.n))));',
            '      id = j;',
            '    }',
            '    skey[i] = key;',
            '    sid[i] = id;',
          ].join('\n')
        : '    skey[i] = keys[row * p.p2 + j];\n    sid[i] = ids[row * p.p2 + j];',
    STEPS:
      v.from === 'x'
        ? '  for (var kk = 2u; kk <= p.block; kk <<= 1u) {\n    for (var jj = kk >> 1u; jj > 0u; jj >>= 1u) {\n      block_step(t, base, kk, jj);\n    }\n  }'
        : '  for (var jj = p.block >> 1u; jj > 0u; jj >>= 1u) {\n    block_step(t, base, p.k, jj);\n  }',
    STORE: v.final
      ? '    if (j < p.out_count) {\n      out[row_element(row, j, p.out_count)] = sid[i];\n    }'
      : '    keys[row * p.p2 + j] = skey[i];\n    ids[row * p.p2 + j] = sid[i];',
  }),
});

const sortMerge = defineKernel({
  name: 'sort_merge',
  source: 'sort-merge.wgsl',
  params: { pairs: 'u32', p2: 'u32', k: 'u32', j: 'u32' },
  outputs: { keys: 'u32', ids: 'u32' },
  grid: { threads: 'pairs', invoke: 'merge_pair' },
  workgroupSize: MERGE_WG,
});

/**
 * The indices (int32) of the first outCount elements of every row along dim of x in sorted order: ascending (NaN
 * last) or descending (NaN first), ties by lower index. Contiguous output of x's shape with outCount at dim.
 */
export function sortKernel(ctx: GpuContext, x: GpuOperand, dim: number, descending: boolean, outCount: number): GpuBuffer {
  const shape = x.view.shape;
  const n = shape[dim];
  const inner = numel(shape.slice(dim + 1));
  const rows = numel(shape.filter((_, i) => i !== dim));
  const out = ctx.alloc(wordBytes(rows * outCount, 1));
  if (rows * outCount === 0) return out;
  const p2 = pow2AtLeast(n);
  const policy = softmaxPolicyName(ctx.gpuDevice);
  const block = Math.min(p2, sortTuning.block ?? SORT_BLOCK[policy]);
  // Workgroup memory in three sizes (pipelines per size, not per row length).
  const capacity = block <= 64 ? 64 : block <= 512 ? 512 : BLOCK_MAX;
  const maxWg = sortTuning.maxWorkgroupSize ?? SORT_WORKGROUP[policy];
  const wg = Math.max(1, Math.min(block / 2, maxWg));
  const blocks = p2 / block;
  const run = (src: GpuOperand, strided: boolean) => {
    const params = {
      rows,
      n,
      inner,
      out_count: outCount,
      p2,
      block,
      k: 0,
      flip: descending ? 0xffffffff : 0,
      offset: src.view.offset,
      rank: strided ? shape.length : 0,
      shape: strided ? [...shape] : [],
      strides: strided ? [...src.view.strides] : [],
    };
    const variant = { dtype: src.dtype, strided, capacity, wg };
    const workgroups = grid1d(rows * blocks, 1);
    if (blocks === 1) {
      sortBlock.run(ctx, { ...variant, from: 'x', final: true }, params, { out, x: src.buffer }, { workgroups });
      return;
    }
    const keys = ctx.alloc(rows * p2 * 4);
    const ids = ctx.alloc(rows * p2 * 4);
    try {
      sortBlock.run(ctx, { ...variant, from: 'x', final: false }, params, { keys, ids, x: src.buffer }, { workgroups });
      for (let k = 2 * block; k <= p2; k *= 2) {
        for (let j = k / 2; j >= block; j /= 2) sortMerge.run(ctx, {}, { pairs: (rows * p2) / 2, p2, k, j }, { keys, ids });
        const final = k === p2;
        sortBlock.run(
          ctx,
          { ...variant, dtype: 'int32', strided: false, from: 'scratch', final },
          { ...params, k },
          final ? { out, keys, ids } : { keys, ids },
          { workgroups },
        );
      }
    } finally {
      ctx.release(keys);
      ctx.release(ids);
    }
  };
  if (isContiguous(x.view)) run(x, false);
  else if (shape.length <= MAX_STRIDED_RANK && x.view.strides.every((s) => s >= 0)) run(x, true);
  else withContiguous(ctx, x, (c) => run(c, false));
  return out;
}
