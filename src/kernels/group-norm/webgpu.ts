// Launcher of group norm (group-norm.wgsl): one workgroup per (n, group), one dispatch; a packed 16-bit output whose
// groups are not whole words goes through float32 and a cast (two dispatches).
import { lanesPerWord, type DType } from '../../core/dtype.js';
import { numel } from '../../core/shape.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import { viaFloat32, type GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { grid1d, workgroupReduce } from '../../runtime/webgpu/kernels/wgsl.js';

/** Groups this large get 256 invocations; small ones 64 (SwiftShader and real GPUs pay per idle invocation). */
const LARGE_GROUP = 16384;

const groupNorm = defineKernel({
  name: 'group-norm',
  source: 'group-norm.wgsl',
  // weight, bias: their dtypes, or 'none'.
  variant: { dtype: 'dtype', weight: 'string', bias: 'string', outDtype: 'dtype', wg: 'number' },
  params: {
    groups: 'u32', // workgroups: N * numGroups
    num_groups: 'u32',
    cg: 'u32', // channels per group
    s: 'u32', // T * H * W
    h: 'u32',
    w: 'u32',
    x_off: 'u32',
    xs_n: 'u32',
    xs_c: 'u32',
    xs_t: 'u32',
    xs_h: 'u32',
    xs_w: 'u32',
    w_off: 'u32',
    ws: 'u32',
    b_off: 'u32',
    bs: 'u32',
    eps: 'f32',
  },
  outputs: { out: { packed: 'outDtype' } },
  inputs: {
    x: { packed: 'dtype' },
    weight: { packed: (v) => v.weight as DType, when: (v) => v.weight !== 'none' },
    bias: { packed: (v) => v.bias as DType, when: (v) => v.bias !== 'none' },
  },
  grid: 'custom',
  workgroupSize: (v) => v.wg,
  constants: (v) => ({ LANES: lanesPerWord(v.outDtype), BITS: 32 / lanesPerWord(v.outDtype) }),
  functions: () => workgroupReduce({ name: 'workgroup_sum', type: 'f32', combine: 'a + b', result: 'reusable' }),
  code: (v) => {
    let affine = 'y';
    if (v.weight !== 'none') affine = `${affine} * load_weight(p.w_off + c * p.ws)`;
    if (v.bias !== 'none') affine = `${affine} + load_bias(p.b_off + c * p.bs)`;
    return { AFFINE: affine };
  },
});

export function groupNormKernel(
  ctx: GpuContext,
  x: GpuOperand,
  numGroups: number,
  weight: GpuOperand | undefined,
  bias: GpuOperand | undefined,
  eps: number,
  outDtype: DType = x.dtype,
): GpuBuffer {
  const shape = x.view.shape;
  const [n, c, t, h, w] = shape;
  const total = numel(shape);
  const cg = c / numGroups;
  const count = cg * t * h * w;
  const lanes = lanesPerWord(outDtype);
  if (lanes > 1 && count % lanes !== 0) {
    // Neighbouring groups would share packed output words.
    return viaFloat32(ctx, shape, outDtype, false, () => groupNormKernel(ctx, x, numGroups, weight, bias, eps, 'float32'));
  }
  const out = ctx.alloc(wordBytes(total, lanes));
  if (total === 0) return out;
  const [xs_n, xs_c, xs_t, xs_h, xs_w] = x.view.strides;
  const groups = n * numGroups;
  groupNorm.run(
    ctx,
    { dtype: x.dtype, weight: weight?.dtype ?? 'none', bias: bias?.dtype ?? 'none', outDtype, wg: count >= LARGE_GROUP ? 256 : 64 },
    {
      groups,
      num_groups: numGroups,
      cg,
      s: t * h * w,
      h,
      w,
      x_off: x.view.offset,
      xs_n,
      xs_c,
      xs_t,
      xs_h,
      xs_w,
      w_off: weight?.view.offset ?? 0,
      ws: weight?.view.strides[0] ?? 0,
      b_off: bias?.view.offset ?? 0,
      bs: bias?.view.strides[0] ?? 0,
      eps,
    },
    { out, x: x.buffer, weight: weight?.buffer, bias: bias?.buffer },
    { workgroups: grid1d(groups, 1) },
  );
  return out;
}
