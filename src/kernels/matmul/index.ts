// matmul's kernels on each backend (ops/matmul.ts, ops/scaled-mm.ts and the MoE router call them): a [.., M, K] .
// b [.., K, N] with optional FP8 scalings (tensorwise, rowwise, 128x128 blocks), bias, residual and SwiGLU epilogues.
import type { DType } from '../../core/dtype.js';
import type { MatmulDims, MatmulScaling, Operand } from '../../runtime/backend.js';
import { defineOpKernels } from '../op-kernels.js';
import { matmulReference } from './cpu.js';
import { matmulWebGpu } from './webgpu.js';

/**
 * a: [...batch, m, k], b: [...batch, k, n] (views already broadcast over batch); result contiguous [...batch, m, n],
 * accumulated in float32 or better. With scaling (2-D only): dequantization scales, bias and result scale; an FP8
 * output then saturates.
 */
export interface MatmulArgs<H> {
  readonly a: Operand<H>;
  readonly b: Operand<H>;
  readonly dims: MatmulDims;
  readonly outDtype: DType;
  readonly scaling?: MatmulScaling<H>;
}

export const matmulKernels = defineOpKernels<MatmulArgs<unknown>>({
  cpu: (backend, args) => {
    const a = args as MatmulArgs<never>;
    return matmulReference(backend, a.a, a.b, a.dims, a.outDtype, a.scaling);
  },
  webgpu: (backend, args) => {
    const a = args as MatmulArgs<never>;
    return matmulWebGpu(backend, a.a, a.b, a.dims, a.outDtype, a.scaling);
  },
});
