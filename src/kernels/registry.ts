// The op table: one row per op that owns its kernels (a folder kernels/<op>/ with index.ts, cpu.ts, webgpu.ts and its
// .wgsl), naming its implementation on each backend, as ONNX Runtime's WebGPU op table resolves an op to its kernel.
// These ops are not Backend methods: Backend keeps the device primitives and the ops not yet moved to a folder
// (docs/architecture.md). Adding an op: its folder, one row here, and its public function in ops/ (docs/kernels.md).
import type { Backend } from '../runtime/backend.js';
import { gatedDeltaNetKernels } from './gated-delta-net/index.js';
import { attentionInputsKernels } from './attention-inputs/index.js';
import { channelRmsNormKernels } from './channel-rms-norm/index.js';
import { logMelKernels } from './log-mel/index.js';
import { ropeKernels } from './rope/index.js';
import { upsample2xKernels } from './upsample2x/index.js';
import { indexAddKernels } from './index-add/index.js';
import { scatterTargetsKernels } from './scatter-targets/index.js';
import { padKernels } from './pad/index.js';
import { overlapAddKernels } from './overlap-add/index.js';
import { resampleKernels } from './resample/index.js';
import { convTranspose1dKernels } from './conv-transpose1d/index.js';
import { convKernels } from './conv/index.js';
import { crossEntropyBackwardKernels, crossEntropyForwardKernels } from './cross-entropy/index.js';
import { rmsNormKernels } from './rms-norm/index.js';
import { groupNormKernels } from './group-norm/index.js';
import { adamStepKernels, clipGradNormKernels, optimCountKernels, sgdStepKernels } from './optim/index.js';
import { softmaxKernels } from './softmax/index.js';
import { sampleKernels, sampleRowsKernels } from './sample/index.js';
import { quantizeBlocksKernels } from './quantize-blocks/index.js';
import { int4DequantKernels, int4QuantizeKernels } from './int4/index.js';
import { swigluKernels } from './swiglu/index.js';
import { expertLinearKernels, expertWeightGradKernels, moeRouteKernels, moeRouterKernels, swigluBackwardKernels } from './moe/index.js';
import { attentionKernels } from './attention/index.js';
import { attentionBackwardKernels } from './attention-backward/index.js';
import { fftKernels, stftKernels } from './fft/index.js';
import { gatherKernels } from './gather/index.js';
import { indexSelectKernels } from './index-select/index.js';
import { matmulKernels } from './matmul/index.js';
import { reduceKernels } from './reduce/index.js';
import { sumIntKernels } from './sum-int/index.js';
import { scanKernels } from './scan/index.js';
import { sortKernels } from './sort/index.js';
import { int64BinaryKernels, int64CastKernels, int64RowsKernels } from './int64/index.js';
import { type OpKernels, runOpKernels } from './op-kernels.js';
import { shortConvKernels } from './short-conv/index.js';
import { fusedMapKernels, fusedReduceKernels, reduceMapKernels } from './fused-map/index.js';

export const OP_KERNELS = {
  shortConv: shortConvKernels,
  gatedDeltaNet: gatedDeltaNetKernels,
  attentionInputs: attentionInputsKernels,
  channelRmsNorm: channelRmsNormKernels,
  logMel: logMelKernels,
  rope: ropeKernels,
  upsample2x: upsample2xKernels,
  indexAdd: indexAddKernels,
  scatterTargets: scatterTargetsKernels,
  pad: padKernels,
  overlapAdd: overlapAddKernels,
  resample: resampleKernels,
  convTranspose1d: convTranspose1dKernels,
  conv: convKernels,
  crossEntropyForward: crossEntropyForwardKernels,
  crossEntropyBackward: crossEntropyBackwardKernels,
  rmsNorm: rmsNormKernels,
  groupNorm: groupNormKernels,
  adamStep: adamStepKernels,
  sgdStep: sgdStepKernels,
  optimCount: optimCountKernels,
  clipGradNorm: clipGradNormKernels,
  softmax: softmaxKernels,
  sample: sampleKernels,
  sampleRows: sampleRowsKernels,
  quantizeBlocks: quantizeBlocksKernels,
  int4Dequant: int4DequantKernels,
  int4Quantize: int4QuantizeKernels,
  swiglu: swigluKernels,
  moeRoute: moeRouteKernels,
  moeRouter: moeRouterKernels,
  swigluBackward: swigluBackwardKernels,
  expertLinear: expertLinearKernels,
  expertWeightGrad: expertWeightGradKernels,
  attention: attentionKernels,
  attentionBackward: attentionBackwardKernels,
  fft: fftKernels,
  stft: stftKernels,
  indexSelect: indexSelectKernels,
  gather: gatherKernels,
  matmul: matmulKernels,
  reduce: reduceKernels,
  sumInt: sumIntKernels,
  scan: scanKernels,
  sort: sortKernels,
  int64Binary: int64BinaryKernels,
  int64Cast: int64CastKernels,
  int64Rows: int64RowsKernels,
  fusedMap: fusedMapKernels,
  fusedReduce: fusedReduceKernels,
  reduceMap: reduceMapKernels,
} as const;

export type OpName = keyof typeof OP_KERNELS;
export type OpArgs<K extends OpName> = Parameters<(typeof OP_KERNELS)[K]['cpu']>[1];
export type OpOutput<K extends OpName> = ReturnType<(typeof OP_KERNELS)[K]['cpu']>;

/**
 * Sees every op a traced function runs (compile/trace.ts): it gets the op and a function that runs it, and returns
 * what that returns.
 */
export type KernelObserver = (name: OpName, backend: Backend, args: unknown, run: () => unknown) => unknown;
let observer: KernelObserver | undefined;

/** Installs (or, with undefined, removes) the observer; returns the one it replaces. */
export function observeKernels(next: KernelObserver | undefined): KernelObserver | undefined {
  const previous = observer;
  observer = next;
  return previous;
}

/** Runs op `name` on `backend`'s device; returns the output's handle(s) (wrap them with ops/util's wrap). */
export function runKernel<K extends OpName>(name: K, backend: Backend, args: OpArgs<K>): OpOutput<K> {
  const kernels = OP_KERNELS[name] as OpKernels<OpArgs<K>, OpOutput<K>>;
  if (observer) return observer(name, backend, args, () => runOpKernels(kernels, backend, args)) as OpOutput<K>;
  return runOpKernels(kernels, backend, args);
}
