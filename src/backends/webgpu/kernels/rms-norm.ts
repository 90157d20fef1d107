// Launcher of RMSNorm (rms-norm.wgsl): one invocation per row for short rows in bulk, one workgroup per row
// otherwise (few rows, or long ones such as a 2048+ hidden size).
import { lanesPerWord, type DType } from '../../../core/dtype.js';
import { numel } from '../../../core/shape.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../gpu-context.js';
import { viaFloat32, type GpuOperand } from './elementwise.js';
import { uniformWords, withContiguous } from './nn-util.js';
import { commonWgsl, encodeFn, fillTemplate, grid1d, loadFn, wgslSource } from './wgsl.js';

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
      const key = ['rms-norm', x.dtype, cw?.dtype ?? 'none', outDtype, wg].join('|');
      const build = () =>
        commonWgsl() +
        fillTemplate(wgslSource(import.meta.url, 'rms-norm.wgsl'), {
          WEIGHT_BINDING: cw ? '@group(0) @binding(3) var<storage, read> w: array<u32>;' : '',
          FUNCTIONS: loadFn('load0', 'in0', x.dtype, 'f32') + (cw ? loadFn('load_w', 'w', cw.dtype, 'f32') : '') + encodeFn('encode_out', outDtype, 'f32'),
          APPLY_WEIGHT: cw ? `load_w(p.w_off + c) * ${roundExpr(x.dtype, 'x * r')}` : roundExpr(x.dtype, 'x * r'),
          WG: wg,
          LANES: lanes,
          BITS: 32 / lanes,
        });
      const params = uniformWords([rows, d, cx.view.offset, cw?.view.offset ?? 0, { f32: eps }]);
      const buffers = cw ? [out, cx.buffer, cw.buffer] : [out, cx.buffer];
      if (perRow) ctx.dispatch(ctx.pipeline(key, build, 'row_main'), params, buffers, grid1d(rows, 64));
      else ctx.dispatch(ctx.pipeline(key, build, 'workgroup_main'), params, buffers, grid1d(rows, 1));
      return out;
    }),
  );
}

function withOptionalContiguous<R>(ctx: GpuContext, x: GpuOperand | undefined, kernel: (x: GpuOperand | undefined) => R): R {
  return x ? withContiguous(ctx, x, kernel) : kernel(undefined);
}
