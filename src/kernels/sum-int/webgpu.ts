// Launcher of sum-int.wgsl: one workgroup per output element, 64-bit integer partial sums merged by a fixed tree
// into an int64 result (two words an element). Narrow integers load through their packed codes, int64 as its words.
import { numel } from '../../core/shape.js';
import type { GpuBuffer, GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { grid1d, workgroupReduce } from '../../runtime/webgpu/kernels/wgsl.js';

const ADD64 = `
fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let lo = a.x + b.x;
  return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}
`;
const SUM64 = () => workgroupReduce({ name: 'sum64', type: 'vec2<u32>', combine: 'add64(a, b)' });
const PARAMS = { outputs: 'u32', size: 'u32', inner: 'u32', x_off: 'u32' } as const;

const sumNarrow = defineKernel({
  name: 'sum_int',
  source: 'sum-int.wgsl',
  variant: { dtype: 'dtype' },
  params: PARAMS,
  outputs: { out: 'u32' },
  inputs: { x: { packed: 'dtype', compute: 'i32' } },
  grid: 'custom',
  workgroupSize: () => 64,
  functions: () =>
    `${ADD64}
fn load64(k: u32) -> vec2<u32> {
  let v = load_x(k);
  return vec2<u32>(bitcast<u32>(v), select(0u, 0xffffffffu, v < 0));
}
${SUM64()}`,
});

const sumInt64 = defineKernel({
  name: 'sum_int64',
  source: 'sum-int.wgsl',
  params: PARAMS,
  outputs: { out: 'u32' },
  inputs: { x: 'u32' },
  grid: 'custom',
  workgroupSize: () => 64,
  functions: () =>
    `${ADD64}
fn load64(k: u32) -> vec2<u32> {
  return vec2<u32>(x[2u * k], x[2u * k + 1u]);
}
${SUM64()}`,
});

/** Contiguous x summed over dim into a contiguous int64 result (x's shape without dim). */
export function sumIntKernel(ctx: GpuContext, x: GpuOperand, dim: number): GpuBuffer {
  const shape = x.view.shape;
  const outputs = numel(shape.slice(0, dim)) * numel(shape.slice(dim + 1));
  const out = ctx.alloc(Math.max(4, 8 * outputs));
  if (outputs === 0) return out;
  const params = { outputs, size: shape[dim], inner: numel(shape.slice(dim + 1)), x_off: x.view.offset };
  const workgroups = { workgroups: grid1d(outputs, 1) };
  if (x.dtype === 'int64') sumInt64.run(ctx, {}, params, { out, x: x.buffer }, workgroups);
  else sumNarrow.run(ctx, { dtype: x.dtype }, params, { out, x: x.buffer }, workgroups);
  return out;
}
