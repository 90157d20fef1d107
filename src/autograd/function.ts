// How an op joins the tape: differentiable(name, inputs, forward, rule, save). Without an input that requires grad
// (or in noGrad) it is just forward(); otherwise forward runs with recording off (its internal ops leave no
// nodes) and the output gets one node with the rule. Only the tensors the rule names are saved, so an add keeps
// nothing alive and a mul keeps its two inputs.
import type { Tensor } from '../core/tensor.js';
import { noGrad } from './grad-mode.js';
import { anyNeedsGrad, record } from './node.js';

export type Input = Tensor | number | undefined;
export type Grads = readonly (Tensor | undefined)[];

/**
 * What a rule sees: the inputs (saved views; numbers as they were; unsaved tensors undefined), the output, and
 * which inputs want a gradient (a rule may skip the others: a frozen weight's costs a matmul).
 */
export interface Saved {
  readonly inputs: readonly Input[];
  readonly out: Tensor | undefined;
  readonly needs: readonly boolean[];
}

export interface SaveSpec {
  /** Indices of the tensor inputs the rule reads. */
  readonly inputs?: readonly number[];
  /** Whether the rule reads the output. */
  readonly out?: boolean;
}

export function differentiable(
  name: string,
  inputs: readonly Input[],
  forward: () => Tensor,
  rule: (g: Tensor, saved: Saved) => Grads,
  save: SaveSpec = {},
): Tensor {
  if (!anyNeedsGrad(inputs)) return forward();
  const out = noGrad(forward);
  const needs = inputs.map((x) => typeof x === 'object' && x.requiresGrad);
  const which = (save.inputs ?? []).filter((i) => typeof inputs[i] === 'object');
  const tensors = [...which.map((i) => inputs[i] as Tensor), ...(save.out ? [out] : [])];
  return record(out, name, inputs, tensors, (g, saved) => {
    const view: Input[] = inputs.map((x) => (typeof x === 'object' ? undefined : x));
    which.forEach((i, k) => (view[i] = saved[k]));
    return rule(g, { inputs: view, out: save.out ? saved[saved.length - 1] : undefined, needs });
  });
}

/**
 * An op without a backward rule yet: on inputs that require grad its output still joins the tape, and backward()
 * through it fails naming the op, rather than leaving a gradient silently missing.
 */
export function notDifferentiable(name: string, inputs: readonly Input[], forward: () => Tensor): Tensor {
  return differentiable(name, inputs, forward, () => {
    throw new Error(`backward through ${name} is not implemented yet; detach() its inputs or compute it under noGrad()`);
  });
}
