// Launcher of the channel RMS norm (channel-rms-norm.wgsl): one dispatch, one invocation per (n, output word's
// positions); a packed 16-bit output with an odd T*H*W goes through float32 and a cast (two dispatches).
import { lanesPerWord, type DType } from '../../core/dtype.js';
import { numel } from '../../core/shape.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import { viaFloat32, type GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';

const channelRmsNorm = defineKernel({
  name: 'channel-rms-norm',
  source: 'channel-rms-norm.wgsl',
  // weight: its dtype, or 'none'.
  variant: { dtype: 'dtype', weight: 'string', outDtype: 'dtype', silu: 'boolean' },
  params: {
    columns: 'u32', // N * S / LANES
    c: 'u32',
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
    eps: 'f32',
  },
  outputs: { out: { packed: 'outDtype' } },
  inputs: { x: { packed: 'dtype' }, weight: { packed: (v) => v.weight as DType, when: (v) => v.weight !== 'none' } },
  grid: { threads: 'columns', invoke: 'norm_column' },
  workgroupSize: 64,
  constants: (v) => ({ LANES: lanesPerWord(v.outDtype), BITS: 32 / lanesPerWord(v.outDtype) }),
  code: (v) => ({
    APPLY_WEIGHT: v.weight !== 'none' ? 'y * load_weight(p.w_off + c * p.ws)' : 'y',
    ACTIVATION: v.silu ? 'v / (1.0 + exp(-v))' : 'v',
  }),
});

export function channelRmsNormKernel(
  ctx: GpuContext,
  x: GpuOperand,
  weight: GpuOperand | undefined,
  eps: number,
  silu: boolean,
  outDtype: DType = x.dtype,
): GpuBuffer {
  const shape = x.view.shape;
  const [n, c, t, h, w] = shape;
  const s = t * h * w;
  const lanes = lanesPerWord(outDtype);
  if (lanes > 1 && s % lanes !== 0) {
    // Channels would share packed output words.
    return viaFloat32(ctx, shape, outDtype, false, () => channelRmsNormKernel(ctx, x, weight, eps, silu, 'float32'));
  }
  const out = ctx.alloc(wordBytes(numel(shape), lanes));
  if (numel(shape) === 0) return out;
  const columns = (n * s) / lanes;
  const [xs_n, xs_c, xs_t, xs_h, xs_w] = x.view.strides;
  channelRmsNorm.run(
    ctx,
    { dtype: x.dtype, weight: weight?.dtype ?? 'none', outDtype, silu },
    { columns, c, s, h, w, x_off: x.view.offset, xs_n, xs_c, xs_t, xs_h, xs_w, w_off: weight?.view.offset ?? 0, ws: weight?.view.strides[0] ?? 0, eps },
    { out, x: x.buffer, weight: weight?.buffer },
  );
  return out;
}
