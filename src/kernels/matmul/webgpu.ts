// matmul on WebGPU: the decode GEMV for M <= 4 over [N, K] weights (gemv.ts) or over [K, N] weights (gemv-kn.ts), else
// the tiled GEMM; all dequantize FP8 on load and apply the scalings and the bias / residual / SwiGLU epilogues.
import type { DType } from '../../core/dtype.js';
import { contiguousView } from '../../core/shape.js';
import type { MatmulDims, MatmulScaling, Operand } from '../../runtime/backend.js';
import type { GpuBuffer } from '../../runtime/webgpu/gpu-context.js';
import { binaryKernel, type GpuOperand, toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import type { WebGpuBackend } from '../../runtime/webgpu/webgpu-backend.js';
import { swigluKernel } from '../swiglu/webgpu.js';
import { gemmKernel, type GemmScaling } from './gemm.js';
import { gemvApplies, gemvKernel } from './gemv.js';
import { gemvKnApplies, gemvKnKernel } from './gemv-kn.js';

export function matmulWebGpu(
  backend: WebGpuBackend,
  a: Operand<GpuBuffer>,
  b: Operand<GpuBuffer>,
  dims: MatmulDims,
  outDtype: DType,
  scaling: MatmulScaling<GpuBuffer> = {},
): GpuBuffer {
  const ga = toGpuOperand(a);
  const gb = toGpuOperand(b);
  const s: GemmScaling = {
    scaleA: scaling.scaleA && { buffer: scaling.scaleA.handle, recipe: scaling.scaleA.recipe },
    scaleB: scaling.scaleB && { buffer: scaling.scaleB.handle, recipe: scaling.scaleB.recipe },
    bias: scaling.bias && toGpuOperand(scaling.bias),
    scaleResult: scaling.scaleResult,
    residual: scaling.residual && toGpuOperand(scaling.residual),
    unary: scaling.unary,
    int4B: scaling.int4B && {
      scale: toGpuOperand(scaling.int4B.scale),
      zero: toGpuOperand(scaling.int4B.zero),
      groupSize: scaling.int4B.groupSize,
      perm: scaling.int4B.perm && toGpuOperand(scaling.int4B.perm),
    },
  };
  if (scaling.activation === 'swiglu') return matmulSwiglu(backend, ga, gb, dims, outDtype, s);
  return product(backend, ga, gb, dims, outDtype, s);
}

/** The product without SwiGLU: a decode GEMV for the weight's layout when M <= 4, else the tiled GEMM. */
function product(backend: WebGpuBackend, a: GpuOperand, b: GpuOperand, dims: MatmulDims, outDtype: DType, s: GemmScaling): GpuBuffer {
  if (gemvApplies(b, dims)) return gemvKernel(backend, a, b, dims, outDtype, s);
  if (s.int4B) return gemmKernel(backend, a, b, dims, outDtype, s);
  if (gemvKnApplies(b, dims)) return gemvKnKernel(backend, a, b, dims, outDtype, s);
  return gemmKernel(backend, a, b, dims, outDtype, s);
}

/**
 * silu(gate) * up of a stacked gate|up product: in the decode GEMV's epilogue (one dispatch) when the scales
 * allow it (none, or block scales applied along K); otherwise the product, SwiGLU and the residual apart.
 */
function matmulSwiglu(backend: WebGpuBackend, a: GpuOperand, b: GpuOperand, dims: MatmulDims, outDtype: DType, s: GemmScaling): GpuBuffer {
  const fusable = !s.scaleA && !s.bias && !s.scaleResult && (!s.scaleB || s.scaleB.recipe === 'block');
  if (fusable && gemvApplies(b, dims)) return gemvKernel(backend, a, b, dims, outDtype, { ...s, activation: 'swiglu' });
  const half = dims.n / 2;
  const { residual, ...rest } = s;
  const full = product(backend, a, b, dims, outDtype, rest);
  const act = swigluKernel(backend, { buffer: full, dtype: outDtype, view: contiguousView([dims.m, dims.n]) });
  backend.release(full);
  if (!residual) return act;
  const out = binaryKernel(backend, 'add', { buffer: act, dtype: outDtype, view: contiguousView([dims.m, half]) }, residual, [dims.m, half], outDtype);
  backend.release(act);
  return out;
}
