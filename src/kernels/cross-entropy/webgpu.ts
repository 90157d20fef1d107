// Launchers of the fused cross-entropy kernels: the forward (cross-entropy.wgsl: one workgroup per row, the row read
// once, per-row logsumexp and nll written) and the backward (cross-entropy-grad.wgsl: one invocation per output
// word of d logits, computed from the logits and the saved logsumexp). Between the two only [rows] float32 lives:
// no softmax or log-softmax over the classes is ever stored.
import { lanesPerWord, type DType } from '../../core/dtype.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { DEVICE_ERROR_WGSL, deviceErrorCode } from '../../runtime/webgpu/kernels/device-error.js';
import { softmaxWorkgroupWgsl } from '../softmax/webgpu.js';
import { grid1d, wgslSource } from '../../runtime/webgpu/kernels/wgsl.js';

/** Where element (row, j) of the [rows, d] logits view lives. */
const LOGITS_PARAMS = { d: 'u32', x_off: 'u32', row_stride: 'u32', col_stride: 'u32', t_off: 'u32', t_stride: 'u32', ignore_index: 'i32' } as const;

const crossEntropyForward = defineKernel({
  name: 'cross_entropy',
  source: 'cross-entropy.wgsl',
  variant: { dtype: 'dtype', wg: 'number' },
  params: { rows: 'u32', ...LOGITS_PARAMS },
  outputs: { lse: 'f32', nll: 'f32', err: 'atomic<u32>' },
  inputs: { x: { packed: 'dtype' }, targets: 'i32' },
  grid: 'custom',
  workgroupSize: (v) => v.wg,
  constants: () => ({ ERR_OP: deviceErrorCode('crossEntropy') }),
  functions: () => wgslSource('online-softmax.wgsl') + softmaxWorkgroupWgsl() + DEVICE_ERROR_WGSL,
});

const crossEntropyBackward = defineKernel({
  name: 'cross_entropy_grad',
  source: 'cross-entropy-grad.wgsl',
  variant: { dtype: 'dtype', sdtype: 'dtype', out: 'dtype' },
  params: { n: 'u32', ...LOGITS_PARAMS, lse_off: 'u32', s_off: 'u32', s_stride: 'u32' },
  outputs: { out: { packed: 'out' } },
  inputs: { x: { packed: 'dtype' }, targets: 'i32', lse: 'f32', scale: { packed: 'sdtype' } },
  grid: { words: 'n', element: 'cross_entropy_grad_at' },
  functions: () => wgslSource('online-softmax.wgsl'),
});

/** The uniforms locating logits [rows, d] and targets [rows] (views with any non-negative strides). */
function logitsParams(x: GpuOperand, targets: GpuOperand, ignore: number) {
  const [, d] = x.view.shape;
  return {
    d,
    x_off: x.view.offset,
    row_stride: x.view.strides[0],
    col_stride: x.view.strides[1],
    t_off: targets.view.offset,
    t_stride: targets.view.strides[0] ?? 0,
    ignore_index: ignore,
  };
}

/** One dispatch: float32 [rows] logsumexp and nll of logits [rows, d] against int32 targets [rows]. */
export function crossEntropyForwardKernel(ctx: GpuContext, x: GpuOperand, targets: GpuOperand, ignore: number): [GpuBuffer, GpuBuffer] {
  const [rows, d] = x.view.shape;
  const lse = ctx.alloc(wordBytes(rows, 1));
  const nll = ctx.alloc(wordBytes(rows, 1));
  if (rows === 0) return [lse, nll];
  // Long rows want every invocation of a big workgroup; short ones waste fewer idle invocations in a small one.
  const wg = d >= 2048 ? 256 : d >= 256 ? 128 : 64;
  crossEntropyForward.run(
    ctx,
    { dtype: x.dtype, wg },
    { rows, ...logitsParams(x, targets, ignore) },
    { lse, nll, err: ctx.deviceErrorFlag(), x: x.buffer, targets: targets.buffer },
    { workgroups: grid1d(rows, 1) },
  );
  return [lse, nll];
}

/** One dispatch: d logits [rows, d] in outDtype = (softmax(x) - onehot(target)) * scale[row]. */
export function crossEntropyBackwardKernel(
  ctx: GpuContext,
  x: GpuOperand,
  targets: GpuOperand,
  lse: GpuOperand,
  scale: GpuOperand,
  ignore: number,
  outDtype: DType,
): GpuBuffer {
  const [rows, d] = x.view.shape;
  const n = rows * d;
  const out = ctx.alloc(wordBytes(n, lanesPerWord(outDtype)));
  if (n === 0) return out;
  crossEntropyBackward.run(
    ctx,
    { dtype: x.dtype, sdtype: scale.dtype, out: outDtype },
    { n, ...logitsParams(x, targets, ignore), lse_off: lse.view.offset, s_off: scale.view.offset, s_stride: scale.view.strides[0] ?? 0 },
    { out, x: x.buffer, targets: targets.buffer, lse: lse.buffer, scale: scale.buffer },
  );
  return out;
}
