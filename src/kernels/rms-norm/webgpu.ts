// Launcher of RMSNorm (rms-norm.wgsl): one invocation per row for short rows in bulk, one workgroup per row
// otherwise (few rows, or long ones such as a 2048+ hidden size).
import { lanesPerWord, type DType } from '../../core/dtype.js';
import { numel } from '../../core/shape.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import { viaFloat32, type GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { bytesOf, defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { withContiguous } from '../../runtime/webgpu/kernels/nn-util.js';
import { grid1d, workgroupReduce } from '../../runtime/webgpu/kernels/wgsl.js';

/** Rows this short go one per invocation when there are enough rows to fill the GPU that way. */
const ROW_PER_INVOCATION_MAX_D = 256;
const ROW_PER_INVOCATION_MIN_ROWS = 2048;
/** Rows this short always go one per invocation (a workgroup per row would idle most of its invocations). */
const ALWAYS_ROW_PER_INVOCATION_D = 32;

/** x rounded to dtype's precision in WGSL: HF casts the normalized value to x's dtype before the weight. */
function roundExpr(dtype: DType, v: string): string {
  if (dtype === 'float16') return `f16_to_f32(f32_to_f16(${v}))`;
  if (dtype === 'bfloat16') return `bf16_to_f32(f32_to_bf16(${v}))`;
  return v;
}

const NO_WEIGHT = 'none';
/** row_main's workgroup size. */
const ROW_WG = 64;

const rmsNorm = defineKernel({
  name: 'rms-norm',
  source: 'rms-norm.wgsl',
  // weight: the weight's dtype or NO_WEIGHT; wg: workgroup_main's size (WG; row_main's is ROW_WG).
  variant: { dtype: 'dtype', weight: 'string', out: 'dtype', wg: 'number' },
  params: { rows: 'u32', d: 'u32', x_off: 'u32', w_off: 'u32', eps: 'f32' },
  outputs: { out: { packed: 'out' } },
  inputs: { x: { packed: 'dtype' }, w: { packed: (v) => v.weight as DType, when: (v) => v.weight !== NO_WEIGHT } },
  grid: 'custom',
  workgroupSize: (v) => v.wg,
  constants: (v) => ({ ROW_WG, LANES: lanesPerWord(v.out), BITS: 32 / lanesPerWord(v.out) }),
  functions: () => workgroupReduce({ name: 'row_sum', type: 'f32', combine: 'a + b' }),
  code: (v) => ({ APPLY_WEIGHT: v.weight !== NO_WEIGHT ? `load_w(p.w_off + c) * ${roundExpr(v.dtype, 'x * r')}` : roundExpr(v.dtype, 'x * r') }),
});

export function rmsNormKernel(ctx: GpuContext, x: GpuOperand, weight: GpuOperand | undefined, eps: number, outDtype: DType = x.dtype): GpuBuffer {
  const shape = x.view.shape;
  const d = shape[shape.length - 1];
  const n = numel(shape);
  const lanes = lanesPerWord(outDtype);
  if (lanes > 1 && d % lanes !== 0) {
    // Rows would share packed output words between invocations.
    return viaFloat32(ctx, shape, outDtype, false, () => rmsNormKernel(ctx, x, weight, eps, 'float32'));
  }
  const out = ctx.alloc(wordBytes(n, lanes));
  if (n === 0) return out;
  const rows = n / d;
  return withContiguous(ctx, x, (cx) =>
    withOptionalContiguous(ctx, weight, (cw) => {
      const perRow = d <= ALWAYS_ROW_PER_INVOCATION_D || (d <= ROW_PER_INVOCATION_MAX_D && rows >= ROW_PER_INVOCATION_MIN_ROWS);
      const wg = d >= 2048 ? 256 : d >= 256 ? 128 : 64;
      rmsNorm.run(
        ctx,
        { dtype: x.dtype, weight: cw?.dtype ?? NO_WEIGHT, out: outDtype, wg },
        { rows, d, x_off: cx.view.offset, w_off: cw?.view.offset ?? 0, eps },
        { out, x: cx.buffer, w: cw?.buffer },
        {
          ...(perRow ? { workgroups: grid1d(rows, ROW_WG), entry: 'row_main' } : { workgroups: grid1d(rows, 1), entry: 'workgroup_main' }),
          bytes: bytesOf(x.dtype, n) + bytesOf(outDtype, n) + (cw ? bytesOf(cw.dtype, d) : 0),
        },
      );
      return out;
    }),
  );
}

function withOptionalContiguous<R>(ctx: GpuContext, x: GpuOperand | undefined, kernel: (x: GpuOperand | undefined) => R): R {
  return x ? withContiguous(ctx, x, kernel) : kernel(undefined);
}
