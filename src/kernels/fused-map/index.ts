// fusedMap: a chain of elementwise ops over one iteration shape in one kernel (compile() builds the chains from a
// traced function). Its values never touch memory between ops, yet every op still rounds to its own dtype, so a fused
// chain gives the same bits as the ops one by one.
import type { DType } from '../../core/dtype.js';
import type { Shape } from '../../core/shape.js';
import { contiguousView } from '../../core/shape.js';
import type { BinaryOp, Operand, ReduceOp, UnaryOp } from '../../runtime/backend.js';
import { reduceReference } from '../reduce/cpu.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineOpKernels } from '../op-kernels.js';
import { fusedMapReference } from './cpu.js';
import { fusedMapKernel, fusedReduceKernel, reduceMapKernel } from './webgpu.js';
import { withContiguous } from '../../runtime/webgpu/kernels/nn-util.js';

/** An operand of a fused op: a chain input (by index), the value of an earlier op of the chain, or a number. */
export type FusedRef =
  | { readonly input: number }
  | { readonly node: number }
  | {
      readonly scalar: number;
      /** float32 or int32, as a ScalarOperand of the op it came from. */
      readonly dtype: DType;
    };

/** One op of the chain, as the Backend method it stands for would have run it. */
export type FusedNode =
  | { readonly kind: 'unary'; readonly op: UnaryOp; readonly args: readonly [FusedRef]; readonly dtype: DType }
  | { readonly kind: 'binary'; readonly op: BinaryOp; readonly args: readonly [FusedRef, FusedRef]; readonly dtype: DType }
  | { readonly kind: 'where'; readonly args: readonly [FusedRef, FusedRef, FusedRef]; readonly dtype: DType }
  | { readonly kind: 'cast'; readonly args: readonly [FusedRef]; readonly dtype: DType; readonly saturate: boolean };

export interface FusedMapArgs<H> {
  /** The iteration shape: every op's output shape. */
  readonly shape: Shape;
  /** Tensor inputs, their views already broadcast to shape. */
  readonly inputs: readonly Operand<H>[];
  readonly nodes: readonly FusedNode[];
  /** Nodes whose values are written out, each to a new contiguous tensor of shape in its dtype. */
  readonly outputs: readonly number[];
}

export { FUSED_MAP_MAX_BUFFERS, FUSED_MAP_MAX_SCALARS, errorFlagBindings } from './limits.js';

/** reduce(op) over `dim` of a chain's one output (`outputs: [m]`): the chain is evaluated where the reduction loads. */
export interface FusedReduceArgs<H> {
  readonly chain: FusedMapArgs<H>;
  readonly op: ReduceOp;
  readonly dim: number;
  readonly outDtype: DType;
}

export const fusedReduceKernels = defineOpKernels<FusedReduceArgs<unknown>, unknown>({
  cpu: (backend, args) => {
    const a = args as FusedReduceArgs<never>;
    const [value] = fusedMapReference(backend, a.chain);
    const dtype = a.chain.nodes[a.chain.outputs[0]].dtype;
    return reduceReference(a.op, { handle: value as never, dtype, view: contiguousView(a.chain.shape) }, a.dim, a.outDtype);
  },
  webgpu: (backend, args) => {
    const a = args as FusedReduceArgs<never>;
    return fusedReduceKernel(backend, { ...a.chain, inputs: a.chain.inputs.map(toGpuOperand) }, a.op, a.dim, a.outDtype);
  },
});

/**
 * reduce(op, x, dim), then a chain over the result's shape whose last input is that result (its operand names the
 * result's view; its handle is not read): one kernel storing the chain's one output (`outputs: [m]`).
 */
export interface ReduceMapArgs<H> {
  readonly x: Operand<H>;
  readonly op: ReduceOp;
  readonly dim: number;
  readonly outDtype: DType;
  readonly chain: FusedMapArgs<H>;
}

export const reduceMapKernels = defineOpKernels<ReduceMapArgs<unknown>, unknown>({
  cpu: (backend, args) => {
    const a = args as ReduceMapArgs<never>;
    const reduced = reduceReference(a.op, a.x, a.dim, a.outDtype);
    const inputs = a.chain.inputs.map((x, k) => (k === a.chain.inputs.length - 1 ? { ...x, handle: reduced as never } : x));
    return fusedMapReference(backend, { ...a.chain, inputs })[0];
  },
  webgpu: (backend, args) => {
    const a = args as ReduceMapArgs<never>;
    const last = a.chain.inputs.length - 1;
    // The reduced input's operand only describes a view: any buffer stands in for its handle.
    const inputs = a.chain.inputs.map((x, k) => toGpuOperand(k === last ? { ...x, handle: a.x.handle } : x));
    return withContiguous(backend, toGpuOperand(a.x), (cx) => reduceMapKernel(backend, cx, a.op, a.dim, a.outDtype, { ...a.chain, inputs }));
  },
});

export const fusedMapKernels = defineOpKernels<FusedMapArgs<unknown>, unknown[]>({
  cpu: (backend, args) => fusedMapReference(backend, args as FusedMapArgs<never>),
  webgpu: (backend, args) => {
    const a = args as FusedMapArgs<never>;
    return fusedMapKernel(backend, { ...a, inputs: a.inputs.map(toGpuOperand) });
  },
});
