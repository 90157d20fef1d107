// Packed 4-bit weights on each backend (ops/int4.ts validates and calls them): dequantization to float32 and
// quantization at load. The layout is formats/int4.ts's: words [rows, k/8], scale / zero [rows, k/g], perm [k].
import type { Operand } from '../../runtime/backend.js';
import type { GpuBuffer } from '../../runtime/webgpu/gpu-context.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { withContiguous } from '../../runtime/webgpu/kernels/nn-util.js';
import { defineOpKernels } from '../op-kernels.js';
import { int4DequantValues, int4QuantizeReference, type Int4Storage } from './cpu.js';
import { int4DequantKernel, int4QuantizeKernel } from './webgpu.js';

export type { Int4Storage } from './cpu.js';

export interface Int4DequantArgs<H> {
  /** Contiguous operands (the op compacts them). */
  readonly w: Int4Storage<H>;
  readonly rows: number;
  readonly k: number;
  readonly group: number;
}

export interface Int4QuantizeArgs<H> {
  /** A contiguous float [rows, k]. */
  readonly x: Operand<H>;
  readonly group: number;
}

/** float32 [rows, k] in activation-column order. */
export const int4DequantKernels = defineOpKernels<Int4DequantArgs<unknown>>({
  cpu: (_backend, args) => {
    const a = args as Int4DequantArgs<never>;
    return Float32Array.from(int4DequantValues(a.w, a.rows, a.k, a.group));
  },
  webgpu: (backend, args) => {
    const a = args as Int4DequantArgs<GpuBuffer>;
    const w = { words: toGpuOperand(a.w.words), scale: toGpuOperand(a.w.scale), zero: toGpuOperand(a.w.zero), perm: a.w.perm && toGpuOperand(a.w.perm) };
    return int4DequantKernel(backend, w, a.rows, a.k, a.group);
  },
});

/** [words int32, scale float32, zero int32]. */
export const int4QuantizeKernels = defineOpKernels<Int4QuantizeArgs<unknown>, [unknown, unknown, unknown]>({
  cpu: (_backend, args) => {
    const a = args as Int4QuantizeArgs<never>;
    const [rows, k] = a.x.view.shape;
    return int4QuantizeReference(a.x, rows, k, a.group);
  },
  webgpu: (backend, args) => {
    const a = args as Int4QuantizeArgs<GpuBuffer>;
    const [rows, k] = a.x.view.shape;
    return withContiguous(backend, toGpuOperand(a.x), (cx) => int4QuantizeKernel(backend, cx, rows, k, a.group));
  },
});
