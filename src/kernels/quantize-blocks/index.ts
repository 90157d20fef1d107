// quantizeBlocks' kernels on each backend (ops/quantize.ts validates and calls them): FP8 block quantization.
import type { Operand, QuantizeBlocks } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { withContiguous } from '../../runtime/webgpu/kernels/nn-util.js';
import { defineOpKernels } from '../op-kernels.js';
import { quantizeBlocksReference } from './cpu.js';
import { quantizeBlocksKernel } from './webgpu.js';

/**
 * x: a contiguous [rows, cols] float tensor view. Returns FP8 codes round(x / scale) (saturated) and the float32
 * scales [ceil(rows/blockRows), ceil(cols/blockCols)], row-major; a block holding a NaN gets a NaN scale.
 */
export interface QuantizeBlocksArgs<H> {
  readonly x: Operand<H>;
  readonly blocks: QuantizeBlocks;
}

/** Returns [data, scale]. */
export const quantizeBlocksKernels = defineOpKernels<QuantizeBlocksArgs<unknown>, [unknown, unknown]>({
  cpu: (_backend, args) => {
    const a = args as QuantizeBlocksArgs<never>;
    return quantizeBlocksReference(a.x, a.blocks);
  },
  webgpu: (backend, args) => {
    const a = args as QuantizeBlocksArgs<never>;
    return withContiguous(backend, toGpuOperand(a.x), (cx) => quantizeBlocksKernel(backend, cx, a.blocks));
  },
});
