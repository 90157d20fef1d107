// The op table: one row per op that owns its kernels (a folder kernels/<op>/ with index.ts, cpu.ts, webgpu.ts and its
// .wgsl), naming its implementation on each backend, as ONNX Runtime's WebGPU op table resolves an op to its kernel.
// These ops are not Backend methods: Backend keeps the device primitives and the ops not yet moved to a folder
// (docs/architecture.md). Adding an op: its folder, one row here, and its public function in ops/ (docs/kernels.md).
import type { Backend } from '../runtime/backend.js';
import { gatedDeltaNetKernels } from './gated-delta-net/index.js';
import { type OpKernels, runOpKernels } from './op-kernels.js';
import { shortConvKernels } from './short-conv/index.js';

export const OP_KERNELS = {
  shortConv: shortConvKernels,
  gatedDeltaNet: gatedDeltaNetKernels,
} as const;

export type OpName = keyof typeof OP_KERNELS;
export type OpArgs<K extends OpName> = Parameters<(typeof OP_KERNELS)[K]['cpu']>[1];

/** Runs op `name` on `backend`'s device; returns the output's handle (wrap it with ops/util's wrap). */
export function runKernel<K extends OpName>(name: K, backend: Backend, args: OpArgs<K>): unknown {
  return runOpKernels(OP_KERNELS[name] as OpKernels<OpArgs<K>>, backend, args);
}
