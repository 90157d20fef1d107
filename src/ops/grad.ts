// torch.autograd.grad: gradients returned rather than accumulated into .grad, and the two ops every sweep needs.
import { gradients, type SweepOps } from '../autograd/backward.js';
import type { Tensor } from '../core/tensor.js';
import { ones } from './creation.js';
import { copyInto } from './shape-ops.js';

export const sweepOps: SweepOps = { ones, copyInto };

/**
 * The gradients of `output` with respect to `inputs` (each requires grad: a leaf, or a tensor made by ops), as
 * torch.autograd.grad; undefined where no gradient reaches an input. gradOutput is needed unless output has one
 * element. Leaves outside `inputs` keep their .grad, and the graph behind a non-leaf input is not swept.
 */
export function grad(output: Tensor, inputs: readonly Tensor[], gradOutput?: Tensor): (Tensor | undefined)[] {
  return gradients(output, inputs, gradOutput, sweepOps);
}
