// The fused cross-entropy's kernels on each backend (ops/loss.ts validates, calls them and records the backward):
// the forward reads each row of logits once and writes nothing [rows, classes]; the backward recomputes the
// probabilities from the forward's logsumexp.
import type { DType } from '../../core/dtype.js';
import type { Operand } from '../../runtime/backend.js';
import { toGpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineOpKernels } from '../op-kernels.js';
import { crossEntropyBackwardReference, crossEntropyForwardReference } from './cpu.js';
import { crossEntropyBackwardKernel, crossEntropyForwardKernel } from './webgpu.js';

/**
 * Forward of logits [rows, classes] (any float dtype and strides) against int32 targets [rows]: float32 [rows]
 * lse = logsumexp of each row and nll = lse - logits[row, target] (0 where target == ignoreIndex). A NaN or +Inf
 * logit, or a row of all -Inf, gives NaN. A target outside [0, classes) that is not ignoreIndex: CPU throws a
 * ShapeError naming the row, GPU gives NaN nll.
 */
export interface CrossEntropyForwardArgs<H> {
  readonly logits: Operand<H>;
  readonly targets: Operand<H>;
  readonly ignoreIndex: number;
}

/**
 * Backward: d logits [rows, classes], contiguous in outDtype, = (exp(logits - lse[row]) - onehot(target)) *
 * rowScale[row], with rowScale taken as 0 on ignored rows. lse: the forward's float32 [rows]; rowScale: the
 * upstream gradient per row, [rows] of any float dtype (stride 0 for one value). Bad targets as in the forward
 * (GPU: NaN row).
 */
export interface CrossEntropyBackwardArgs<H> extends CrossEntropyForwardArgs<H> {
  readonly lse: Operand<H>;
  readonly rowScale: Operand<H>;
  readonly outDtype: DType;
}

/** Returns [lse, nll]. */
export const crossEntropyForwardKernels = defineOpKernels<CrossEntropyForwardArgs<unknown>, [unknown, unknown]>({
  cpu: (_backend, args) => {
    const a = args as CrossEntropyForwardArgs<never>;
    return crossEntropyForwardReference(a.logits, a.targets, a.ignoreIndex);
  },
  webgpu: (backend, args) => {
    const a = args as CrossEntropyForwardArgs<never>;
    return crossEntropyForwardKernel(backend, toGpuOperand(a.logits), toGpuOperand(a.targets), a.ignoreIndex);
  },
});

export const crossEntropyBackwardKernels = defineOpKernels<CrossEntropyBackwardArgs<unknown>>({
  cpu: (_backend, args) => {
    const a = args as CrossEntropyBackwardArgs<never>;
    return crossEntropyBackwardReference(a.logits, a.targets, a.lse, a.rowScale, a.ignoreIndex, a.outDtype);
  },
  webgpu: (backend, args) => {
    const a = args as CrossEntropyBackwardArgs<never>;
    return crossEntropyBackwardKernel(
      backend,
      toGpuOperand(a.logits),
      toGpuOperand(a.targets),
      toGpuOperand(a.lse),
      toGpuOperand(a.rowScale),
      a.ignoreIndex,
      a.outDtype,
    );
  },
});
