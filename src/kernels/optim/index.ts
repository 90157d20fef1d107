// The fused optimizer steps and gradient clipping on each backend (optim/ calls them): each updates its tensors in
// place, and clipGradNorm reads nothing back.
import type { AdamStepHyper, GradNormType, Operand, SgdStepHyper } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineOpKernels } from '../op-kernels.js';
import { adamStepReference, clipGradNormReference, sgdStepReference } from './cpu.js';
import { adamStepKernel, clipGradNormKernel, sgdStepKernel } from './webgpu.js';

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
}

/** One fused SGD step in place (torch.optim.sgd's formulas), operands as for adamStep; momentumBuffer with momentum. */
export interface SgdStepArgs<H> {
  readonly param: Operand<H>;
  readonly grad: Operand<H>;
  readonly momentumBuffer?: H;
  readonly hyper: SgdStepHyper;
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

export const adamStepKernels = defineOpKernels<AdamStepArgs<unknown>, void>({
  cpu: (_backend, args) => {
    const a = args as AdamStepArgs<never>;
    adamStepReference(a.param, a.grad, a.m as Float32Array, a.v as Float32Array, a.vmax as Float32Array | undefined, a.hyper);
  },
  webgpu: (backend, args) => {
    const a = args as AdamStepArgs<never>;
    adamStepKernel(backend, toGpuOperand(a.param), toGpuOperand(a.grad), a.m, a.v, a.vmax, a.hyper);
  },
});

export const sgdStepKernels = defineOpKernels<SgdStepArgs<unknown>, void>({
  cpu: (_backend, args) => {
    const a = args as SgdStepArgs<never>;
    sgdStepReference(a.param, a.grad, a.momentumBuffer as Float32Array | undefined, a.hyper);
  },
  webgpu: (backend, args) => {
    const a = args as SgdStepArgs<never>;
    sgdStepKernel(backend, toGpuOperand(a.param), toGpuOperand(a.grad), a.momentumBuffer, a.hyper);
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
