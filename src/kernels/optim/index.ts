// The fused optimizer steps and gradient clipping on each backend (optim/ calls them): each updates its tensors in
// place, and clipGradNorm reads nothing back.
import type { AdamStepHyper, GradNormType, Operand, SgdStepHyper } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineOpKernels } from '../op-kernels.js';
import { adamStepReference, clipGradNormReference, sgdStepReference } from './cpu.js';
import { adamStepKernel, clipGradNormKernel, optimCountKernel, sgdStepKernel } from './webgpu.js';

/**
 * A capturable step (torch's capturable=True): the numbers that change per step live on the device. counter is the
 * state's float32 [t, 1 - beta1^t, 1 - beta2^t] (t this step's number, optimCount having advanced it), lr a float32
 * [1]; the hyper's decay, stepSize, biasCorrection2Sqrt, first (and SGD's lr) are then ignored and computed from
 * them: decay = 1 - lr * decoupledWd, stepSize = lr / counter[1], sqrt(counter[2]), first = (t == 1).
 */
export interface CapturableArgs<H> {
  readonly counter: H;
  readonly lr: H;
  readonly decoupledWd: number;
}

/**
 * One fused Adam / AdamW step (torch.optim.adam's single-tensor formulas, in its order), in place: param is a
 * contiguous view (any offset) of float32, float16 or bfloat16, rounded once when written; grad any view of its
 * shape and of any float dtype; m, v and vmax (amsgrad; undefined otherwise) float32 storage of param's numel
 * elements from element 0. One dispatch on the GPU.
 */
export interface AdamStepArgs<H> {
  readonly param: Operand<H>;
  readonly grad: Operand<H>;
  readonly m: H;
  readonly v: H;
  readonly vmax?: H;
  readonly hyper: AdamStepHyper;
  readonly capturable?: CapturableArgs<H>;
}

/** One fused SGD step in place (torch.optim.sgd's formulas), operands as for adamStep; momentumBuffer with momentum. */
export interface SgdStepArgs<H> {
  readonly param: Operand<H>;
  readonly grad: Operand<H>;
  readonly momentumBuffer?: H;
  readonly hyper: SgdStepHyper;
  readonly capturable?: CapturableArgs<H>;
}

/** Advances a capturable step's counter [t, 1 - beta1^t, 1 - beta2^t] to t + 1, in place on the device. */
export interface OptimCountArgs<H> {
  readonly counter: H;
  readonly beta1: number;
  readonly beta2: number;
}

/**
 * torch.nn.utils.clip_grad_norm_: the norm of all grads together (contiguous views, any offset, float dtypes), then
 * each grad multiplied in place by min(1, maxNorm / (norm + 1e-6)), with nothing read back. Returns the norm as
 * float32 storage of one element.
 */
export interface ClipGradNormArgs<H> {
  readonly grads: readonly Operand<H>[];
  readonly maxNorm: number;
  readonly normType: GradNormType;
}

/** The host hyper a capturable step's device numbers stand for (the CPU reads them in place). */
function fromDevice<T extends AdamStepHyper | SgdStepHyper>(h: T, c: CapturableArgs<unknown> | undefined): T {
  if (!c) return h;
  const [t, bc1, bc2] = c.counter as Float32Array;
  const lr = (c.lr as Float32Array)[0];
  if ('stepSize' in h) return { ...h, decay: 1 - lr * c.decoupledWd, stepSize: lr / bc1, biasCorrection2Sqrt: Math.sqrt(bc2), first: t === 1 };
  return { ...h, lr, first: t === 1 };
}

export const adamStepKernels = defineOpKernels<AdamStepArgs<unknown>, void>({
  cpu: (_backend, args) => {
    const a = args as AdamStepArgs<never>;
    adamStepReference(a.param, a.grad, a.m as Float32Array, a.v as Float32Array, a.vmax as Float32Array | undefined, fromDevice(a.hyper, a.capturable));
  },
  webgpu: (backend, args) => {
    const a = args as AdamStepArgs<never>;
    adamStepKernel(backend, toGpuOperand(a.param), toGpuOperand(a.grad), a.m, a.v, a.vmax, a.hyper, a.capturable);
  },
});

export const sgdStepKernels = defineOpKernels<SgdStepArgs<unknown>, void>({
  cpu: (_backend, args) => {
    const a = args as SgdStepArgs<never>;
    sgdStepReference(a.param, a.grad, a.momentumBuffer as Float32Array | undefined, fromDevice(a.hyper, a.capturable));
  },
  webgpu: (backend, args) => {
    const a = args as SgdStepArgs<never>;
    sgdStepKernel(backend, toGpuOperand(a.param), toGpuOperand(a.grad), a.momentumBuffer, a.hyper, a.capturable);
  },
});

export const optimCountKernels = defineOpKernels<OptimCountArgs<unknown>, void>({
  cpu: (_backend, args) => {
    const { counter, beta1, beta2 } = args as OptimCountArgs<Float32Array>;
    counter[0] += 1;
    counter[1] = counter[1] * beta1 + (1 - beta1);
    counter[2] = counter[2] * beta2 + (1 - beta2);
  },
  webgpu: (backend, args) => {
    const a = args as OptimCountArgs<never>;
    optimCountKernel(backend, a.counter, a.beta1, a.beta2);
  },
});

export const clipGradNormKernels = defineOpKernels<ClipGradNormArgs<unknown>>({
  cpu: (_backend, args) => {
    const a = args as ClipGradNormArgs<never>;
    return clipGradNormReference(a.grads, a.maxNorm, a.normType);
  },
  webgpu: (backend, args) => {
    const a = args as ClipGradNormArgs<never>;
    const kind = a.normType === 1 ? 'l1' : a.normType === 2 ? 'l2' : 'inf';
    return clipGradNormKernel(backend, a.grads.map(toGpuOperand), a.maxNorm, kind);
  },
});
