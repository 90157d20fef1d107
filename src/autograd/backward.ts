// Reverse-mode sweep: the nodes reachable from the root in reverse topological order, each rule run once with
// recording off, gradients summed where a tensor feeds several ops, leaf gradients accumulated into .grad (as
// PyTorch does across backward() calls). Intermediate gradients are disposed as soon as they are consumed, and
// each node's saved tensors right after its rule ran.
import { DTypeError, ShapeError } from '../core/errors.js';
import { formatShape } from '../core/shape.js';
import { keep, tidy } from '../core/scope.js';
import type { Tensor } from '../core/tensor.js';
import { noGrad } from './grad-mode.js';
import type { Edge, GradNode } from './node.js';

/** Nodes reachable from root, each after every node that consumes its output. */
function topologicalOrder(root: GradNode): GradNode[] {
  const order: GradNode[] = [];
  const seen = new Set<GradNode>();
  // Iterative post-order: a deep graph (hundreds of layers of ops) must not overflow the JS stack.
  const stack: [GradNode, number][] = [[root, 0]];
  seen.add(root);
  while (stack.length) {
    const top = stack[stack.length - 1];
    const [node, i] = top;
    if (i < node.edges.length) {
      top[1]++;
      const next = node.edges[i]?.node;
      if (next && !seen.has(next)) {
        seen.add(next);
        stack.push([next, 0]);
      }
    } else {
      stack.pop();
      order.push(node);
    }
  }
  return order.reverse();
}

/** The gradient in the shape and dtype of the input it belongs to (a rule's result may differ in dtype). */
function conform(g: Tensor, edge: Edge, name: string): Tensor {
  if (g.shape.length !== edge.shape.length || g.shape.some((s, i) => s !== edge.shape[i])) {
    throw new ShapeError(`backward of ${name}: a gradient of shape ${formatShape(g.shape)} for an input of shape ${formatShape(edge.shape)}`);
  }
  if (g.dtype === edge.dtype) return g;
  const c = g.to(edge.dtype);
  g.dispose();
  return c;
}

function accumulate(into: Map<GradNode, Tensor>, node: GradNode, g: Tensor): void {
  const prev = into.get(node);
  if (!prev) into.set(node, g);
  else {
    into.set(node, prev.add(g));
    prev.dispose();
    g.dispose();
  }
}

function accumulateLeaf(leaf: Tensor, g: Tensor, copyInto: SweepOps['copyInto']): void {
  const prev = leaf.grad;
  const slot = leaf.gradBuffer;
  if (slot) {
    // A shared gradient arena: the gradient is written in place, .grad is a view of the slot.
    const sum = prev ? prev.add(g) : g;
    copyInto(slot, sum);
    if (sum !== g) sum.dispose();
    g.dispose();
    leaf.grad ??= keep(slot.detach());
    return;
  }
  // A .grad owns contiguous storage: optimizers and clipping update it in place, and a rule may hand the same
  // gradient to two inputs (a + b) or a broadcast view of it.
  const own = prev || (g.isContiguous() && g.storage.holders === 1) ? g : g.clone();
  if (own !== g) g.dispose();
  leaf.grad = keep(prev ? prev.add(own) : own);
  if (prev) {
    prev.dispose();
    own.dispose();
  }
}

/** root.backward(grad): grad defaults to 1 for a one-element root. */
/**
 * The two ops the sweep itself needs, handed in by ops/tensor-methods.ts: autograd (the tape) sits below the ops,
 * which record onto it, so it does not import them.
 */
export interface SweepOps {
  ones(shape: readonly number[], options: { dtype: Tensor['dtype']; device: Tensor['device'] }): Tensor;
  copyInto(dst: Tensor, src: Tensor): void;
}

let sweeps = 0;
/** backward() calls so far (compile() tells a traced training step, which runs one, from a forward that needs one). */
export function backwardSweeps(): number {
  return sweeps;
}

export function backward(root: Tensor, grad: Tensor | undefined, { ones, copyInto }: SweepOps): void {
  sweeps++;
  if (!root.requiresGrad) throw new DTypeError(`backward() of ${root.describe()}: it does not require grad (no input of the ops that made it does)`);
  if (!grad && root.numel !== 1)
    throw new ShapeError(`backward() of ${root.describe()} needs a gradient argument: only a one-element tensor has an implicit one`);
  if (grad && (grad.shape.length !== root.shape.length || grad.shape.some((s, i) => s !== root.shape[i]))) {
    throw new ShapeError(`backward(grad): grad has shape ${formatShape(grad.shape)}, the tensor ${formatShape(root.shape)}`);
  }
  noGrad(() => {
    // to() copies, so the sweep consumes its own seed and never the caller's gradient.
    const seed = grad ? grad.to(root.dtype) : ones(root.shape, { dtype: root.dtype, device: root.device });
    const node = root.gradFn;
    if (!node) {
      accumulateLeaf(root, seed, copyInto);
      return;
    }
    const grads = new Map<GradNode, Tensor>([[node, seed]]);
    for (const n of topologicalOrder(node)) {
      const g = grads.get(n);
      grads.delete(n);
      if (!g) {
        n.release();
        continue;
      }
      let inputs: readonly (Tensor | undefined)[];
      try {
        // A rule's temporaries die with this scope; the gradients it returns survive it.
        inputs = tidy(() => [...n.apply(g)]);
      } finally {
        g.dispose();
      }
      n.edges.forEach((edge, i) => {
        const gi = inputs[i];
        if (!edge || !gi) {
          gi?.dispose();
          return;
        }
        const c = conform(gi, edge, n.name);
        if (edge.node) accumulate(grads, edge.node, c);
        else accumulateLeaf(edge.leaf!, c, copyInto);
      });
    }
  });
}
