// The MoE kernels on each backend (ops/moe.ts validates and calls them): the router (scores, top-k, weights, with
// the expert ids staying on the device) and the expert-indexed linear layer that reads those ids.
import { isFp8 } from '../../core/dtype.js';
import { contiguousView, transposed2d } from '../../core/shape.js';
import type { ExpertLinearOptions, Operand, RouteOptions } from '../../runtime/backend.js';
import { swigluReference } from '../swiglu/cpu.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { matmulKernels } from '../matmul/index.js';
import { defineOpKernels, runOpKernels } from '../op-kernels.js';
import { expertLinearReference, expertWeightGradReference, moeRouteReference, swigluBackwardReference } from './cpu.js';
import { expertWeightGradKernel } from './expert-weight-grad.js';
import { swigluBackwardKernel } from './swiglu-backward.js';
import { expertLinearKernel } from './expert-linear.js';
import { FUSED_ROUTER_MAX_EXPERTS, type GpuRouteOptions, moeRouteKernel } from './moe-route.js';

/**
 * MoE router: per row of logits [T, E], a score per expert (softmax over experts or an elementwise sigmoid, in
 * float32), the topK experts by score + selectionBias in descending order (ties: the lower expert id first),
 * weighted by their unbiased scores, divided by (their sum + normalizeEps) when normalize, times scale. Returns
 * [ids int32 [T, topK], weights float32 [T, topK]]; with options.sharedExpert logits are [T, E+1] and the outputs
 * [T, topK+1], the last slot (id E, weight sigmoid(logits[:, E])) the shared expert's.
 */
export interface MoeRouteArgs<H> {
  readonly logits: Operand<H>;
  readonly topK: number;
  readonly options: RouteOptions<H>;
}

/**
 * The router projection and moeRoute in one: logits = x [T, H] . weight [E, H]^T in float32 (as linear would store
 * them), then scoring + top-k.
 */
export interface MoeRouterArgs<H> {
  readonly x: Operand<H>;
  readonly weight: Operand<H>;
  readonly topK: number;
  readonly options: RouteOptions<H>;
}

/**
 * Expert-indexed linear layer for MoE, with expert ids read on the device. weight [E, N, K] (expert e's [N, K]
 * linear weight, any float dtype, FP8 with block scales [E, ceil(N/128), ceil(K/128)] in options.scale); ids int32
 * [T, k]; x [T, K] (a token's row serves all its experts) or [T*k, K] (one row per slot). Without combine: out
 * [T*k, N], out[t*k + j] = x_row . W[ids[t, j]]^T. With combine (float32 [T, k]): out [T, N] = sum_j combine[t, j] *
 * (x_row(t, j) . W[ids[t, j]]^T). Accumulates in float32; result in outDtype.
 */
export interface ExpertLinearArgs<H> {
  readonly x: Operand<H>;
  readonly weight: Operand<H>;
  readonly ids: Operand<H>;
  readonly options: ExpertLinearOptions<H>;
}

const gpuRoute = (o: RouteOptions<never>): GpuRouteOptions => ({ ...o, selectionBias: o.selectionBias && toGpuOperand(o.selectionBias) });

/** Returns [ids, weights]. */
export const moeRouteKernels = defineOpKernels<MoeRouteArgs<unknown>, [unknown, unknown]>({
  cpu: (_backend, args) => {
    const a = args as MoeRouteArgs<never>;
    return moeRouteReference(a.logits, a.topK, a.options);
  },
  webgpu: (backend, args) => {
    const a = args as MoeRouteArgs<never>;
    return moeRouteKernel(backend, toGpuOperand(a.logits), a.topK, gpuRoute(a.options));
  },
});

/** Returns [ids, weights]; on WebGPU one dispatch (the logits live in workgroup memory) up to FUSED_ROUTER_MAX_EXPERTS experts, else two. */
export const moeRouterKernels = defineOpKernels<MoeRouterArgs<unknown>, [unknown, unknown]>({
  cpu: (backend, args) => {
    const { x, weight, topK, options } = args as MoeRouterArgs<never>;
    const [t, h] = x.view.shape;
    const e = weight.view.shape[0];
    const logits = runOpKernels(matmulKernels, backend, {
      a: x,
      b: { ...weight, view: transposed2d(weight.view) },
      dims: { batch: [], m: t, n: e, k: h },
      outDtype: 'float32',
    }) as never;
    return moeRouteReference({ handle: logits, dtype: 'float32', view: { shape: [t, e], strides: [e, 1], offset: 0 } }, topK, options);
  },
  webgpu: (backend, args) => {
    const { x, weight, topK, options } = args as MoeRouterArgs<never>;
    const [t, h] = x.view.shape;
    const e = weight.view.shape[0];
    if (e <= FUSED_ROUTER_MAX_EXPERTS && !isFp8(weight.dtype)) return moeRouteKernel(backend, toGpuOperand(x), topK, gpuRoute(options), toGpuOperand(weight));
    const logits = runOpKernels(matmulKernels, backend, {
      a: x,
      b: { ...weight, view: transposed2d(weight.view) },
      dims: { batch: [], m: t, n: e, k: h },
      outDtype: 'float32',
    }) as never;
    try {
      return moeRouteKernel(backend, { buffer: logits, dtype: 'float32', view: contiguousView([t, e]) }, topK, gpuRoute(options));
    } finally {
      backend.release(logits);
    }
  },
});

export const expertLinearKernels = defineOpKernels<ExpertLinearArgs<unknown>>({
  cpu: (backend, args) => {
    const { x, weight, ids, options } = args as ExpertLinearArgs<never>;
    const plain = expertLinearReference(x, weight, ids, options);
    const [t, slots] = ids.view.shape;
    const rows = options.combine ? t : t * slots;
    const n = weight.view.shape[1];
    const asOperand = (h: typeof plain, cols: number): Operand<typeof plain> => ({
      handle: h,
      dtype: options.outDtype,
      view: { shape: [rows, cols], strides: [cols, 1], offset: 0 },
    });
    if (options.activation === 'swiglu') return swigluReference(asOperand(plain, n));
    if (options.residual) return backend.binary('add', asOperand(plain, n), options.residual, [rows, n], options.outDtype);
    return plain;
  },
  webgpu: (backend, args) => {
    const { x, weight, ids, options } = args as ExpertLinearArgs<never>;
    return expertLinearKernel(backend, toGpuOperand(x), toGpuOperand(weight), toGpuOperand(ids), {
      scale: options.scale,
      scaleTransposed: options.scaleTransposed,
      combine: options.combine && toGpuOperand(options.combine),
      outDtype: options.outDtype,
      activation: options.activation,
      residual: options.residual && toGpuOperand(options.residual),
      int4: options.int4 && {
        scale: toGpuOperand(options.int4.scale),
        zero: toGpuOperand(options.int4.zero),
        groupSize: options.int4.groupSize,
        perm: options.int4.perm && toGpuOperand(options.int4.perm),
        transposed: options.int4.transposed,
      },
    });
  },
});

/** SwiGLU's backward: x [..., 2I] (gate|up), g float32 [..., I] -> float32 [..., 2I] (MoE's expert backward). */
export interface SwigluBackwardArgs<H> {
  readonly x: Operand<H>;
  readonly g: Operand<H>;
}

export const swigluBackwardKernels = defineOpKernels<SwigluBackwardArgs<unknown>>({
  cpu: (_backend, args) => {
    const { x, g } = args as SwigluBackwardArgs<never>;
    return swigluBackwardReference(x, g);
  },
  webgpu: (backend, args) => {
    const { x, g } = args as SwigluBackwardArgs<never>;
    return swigluBackwardKernel(backend, toGpuOperand(x), toGpuOperand(g));
  },
});

/**
 * The gradients of stacked expert weights [E, N, K] of expert-indexed linear layers over the same ids int32 [T, k]:
 * for each term, grad[e] = sum over the slots s with ids[s] = e of combine[s] * g_row(s)^T outer x_row(s), where g
 * [T or T*k, N] is the layer output's gradient and x [T or T*k, K] its input (a row per token or per slot), combine
 * float32 [T, k] (absent: 1). float32 [E, N, K] each, accumulated in float32 (float64 on the CPU); an expert no
 * slot chose gets zeros.
 */
export interface ExpertWeightGradArgs<H> {
  readonly ids: Operand<H>;
  readonly experts: number;
  readonly terms: readonly { readonly g: Operand<H>; readonly x: Operand<H> }[];
  readonly combine?: Operand<H>;
}

/** Returns one handle per term; on WebGPU one plan dispatch, then one per term. */
export const expertWeightGradKernels = defineOpKernels<ExpertWeightGradArgs<unknown>, unknown[]>({
  cpu: (_backend, args) => {
    const { ids, experts, terms, combine } = args as ExpertWeightGradArgs<never>;
    return expertWeightGradReference(ids, experts, terms, combine);
  },
  webgpu: (backend, args) => {
    const { ids, experts, terms, combine } = args as ExpertWeightGradArgs<never>;
    return expertWeightGradKernel(
      backend,
      toGpuOperand(ids),
      experts,
      terms.map(({ g, x }) => ({ g: toGpuOperand(g), x: toGpuOperand(x) })),
      combine && toGpuOperand(combine),
    );
  },
});
