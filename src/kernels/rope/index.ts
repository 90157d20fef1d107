// rope's kernels on each backend (ops/nn.ts validates and calls them, and records its backward).
import type { Operand } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineOpKernels } from '../op-kernels.js';
import { ropeReference } from './cpu.js';
import { ropeKernel } from './webgpu.js';

/**
 * Rotary embedding, rotate-half layout (HF Llama/Qwen): x [S, H, D], cos/sin float32 tables [P, R/2] (R <= D even;
 * R < D is partial rotary); for i < R/2 at position p = offset + s: y[i] = x[i] cos[p, i] - x[i + R/2] sin[p, i],
 * y[i + R/2] = x[i + R/2] cos[p, i] + x[i] sin[p, i], and y[c] = x[c] for c >= R. Contiguous result in x's dtype.
 */
export interface RopeArgs<H> {
  readonly x: Operand<H>;
  readonly cos: Operand<H>;
  readonly sin: Operand<H>;
  readonly positionOffset: number;
}

export const ropeKernels = defineOpKernels<RopeArgs<unknown>, unknown>({
  cpu: (_backend, args) => {
    const a = args as RopeArgs<never>;
    return ropeReference(a.x, a.cos, a.sin, a.positionOffset);
  },
  webgpu: (backend, args) => {
    const a = args as RopeArgs<never>;
    return ropeKernel(backend, toGpuOperand(a.x), toGpuOperand(a.cos), toGpuOperand(a.sin), a.positionOffset);
  },
});
