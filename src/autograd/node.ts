// The tape: each op whose inputs require grad gives its output a GradNode holding the backward rule, edges to the
// inputs' nodes (or the leaf tensors themselves) and the tensors the rule needs, saved as views so that disposing
// the originals does not free them. backward() runs the rules once and releases what they saved.
import type { Tensor } from '../core/tensor.js';
import type { DType } from '../core/dtype.js';
import type { Shape } from '../core/shape.js';
import { keep } from '../core/scope.js';
import { isGradEnabled } from './grad-mode.js';

/** Where an input's gradient goes: the node that made it, or the leaf tensor whose .grad accumulates it. */
export interface Edge {
  readonly node?: GradNode;
  readonly leaf?: Tensor;
  /** The input's dtype and shape: its gradient has both. */
  readonly dtype: DType;
  readonly shape: Shape;
}

/** A backward rule: the gradient of each input (undefined: none) from the output's. Runs with recording off. */
export type BackwardRule = (grad: Tensor, saved: readonly Tensor[]) => readonly (Tensor | undefined)[];

export class GradNode {
  private savedTensors: Tensor[] | undefined;
  /** Each saved tensor's storage version when saved: an in-place write since would make the rule wrong. */
  private readonly versions: number[];

  constructor(
    readonly name: string,
    /** One per op input; undefined where the input needs no gradient. */
    readonly edges: readonly (Edge | undefined)[],
    private readonly rule: BackwardRule,
    saved: readonly Tensor[],
  ) {
    this.savedTensors = saved.map(saveView);
    this.versions = saved.map((t) => t.storage.version);
  }

  /** The tensors the rule will read (empty once it ran or was released). */
  get saved(): readonly Tensor[] {
    return this.savedTensors ?? [];
  }

  /** Runs the rule once; its saved tensors are released right after (torch's retain_graph=False). */
  apply(grad: Tensor): readonly (Tensor | undefined)[] {
    const saved = this.savedTensors;
    if (!saved) throw new Error(`backward through ${this.name} a second time: its saved tensors were released after the first backward()`);
    saved.forEach((t, i) => {
      if (t.storage.version !== this.versions[i]) {
        this.release();
        throw new Error(
          `backward through ${this.name}: a tensor it saved (${t.describe()}) was modified in place (copyInto/writeTensor) after the forward; clone it before writing`,
        );
      }
    });
    try {
      return this.rule(grad, saved);
    } finally {
      this.release();
    }
  }

  release(): void {
    for (const t of this.savedTensors ?? []) t.dispose();
    this.savedTensors = undefined;
  }
}

/** A view of t that keeps its storage alive and belongs to no tidy scope (the node disposes it). */
function saveView(t: Tensor): Tensor {
  const Ctor = t.constructor as new (storage: Tensor['storage'], view: Tensor['layout'], dtype: DType) => Tensor;
  return keep(new Ctor(t.storage, t.layout, t.dtype));
}

/** Whether an op over these inputs records: grad mode is on and some tensor input requires grad. */
export function needsGrad(...inputs: readonly (Tensor | number | undefined)[]): boolean {
  return anyNeedsGrad(inputs);
}

/** needsGrad over an array the caller already has (no rest-argument copy on every eager op). */
export function anyNeedsGrad(inputs: readonly (Tensor | number | undefined)[]): boolean {
  if (!isGradEnabled()) return false;
  for (let i = 0; i < inputs.length; i++) {
    const x = inputs[i];
    if (typeof x === 'object' && x.requiresGrad) return true;
  }
  return false;
}

/**
 * Gives `output` a node over `inputs` (numbers and tensors that need no grad get no edge) and returns it. The
 * rule sees `saved` (saved as views) and the output's gradient.
 */
export function record<T extends Tensor>(
  output: T,
  name: string,
  inputs: readonly (Tensor | number | undefined)[],
  saved: readonly Tensor[],
  rule: BackwardRule,
): T {
  const edges = inputs.map((x): Edge | undefined => {
    if (typeof x !== 'object' || !x.requiresGrad) return undefined;
    return x.gradFn ? { node: x.gradFn, dtype: x.dtype, shape: x.shape } : { leaf: x, dtype: x.dtype, shape: x.shape };
  });
  output.setGradFn(new GradNode(name, edges, rule, saved));
  return output;
}
