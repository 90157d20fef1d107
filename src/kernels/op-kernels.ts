// What an op folder under kernels/ exports: the op's implementation on each backend. The CPU one is the float64
// reference the WebGPU one is tested against; both take the backend they run on and the op's operands.
import type { Backend } from '../runtime/backend.js';
import type { CpuBackend } from '../runtime/cpu/cpu-backend.js';
import type { WebGpuBackend } from '../runtime/webgpu/webgpu-backend.js';

export interface OpKernels<Args, Out = unknown> {
  readonly cpu: (backend: CpuBackend, args: Args) => Out;
  readonly webgpu: (backend: WebGpuBackend, args: Args) => Out;
}

export function defineOpKernels<Args, Out = unknown>(kernels: OpKernels<Args, Out>): OpKernels<Args, Out> {
  return kernels;
}

/** The implementation for `backend`'s device, run on `args`. */
export function runOpKernels<Args, Out>(kernels: OpKernels<Args, Out>, backend: Backend, args: Args): Out {
  return backend.device === 'cpu' ? kernels.cpu(backend as CpuBackend, args) : kernels.webgpu(backend as WebGpuBackend, args);
}
