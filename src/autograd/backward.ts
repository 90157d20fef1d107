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

/** Nodes reachable from root without passing a boundary node, each after every node that consumes its output. */
function topologicalOrder(root: GradNode, boundary?: ReadonlySet<GradNode>): GradNode[] {
  const order: GradNode[] = [];
  const seen = new Set<GradNode>();
  // Iterative post-order: a deep graph (hundreds of layers of ops) must not overflow the JS stack.
  const stack: [GradNode, number][] = [[root, 0]];
  seen.add(root);
  while (stack.length) {
    const top = stack[stack.length - 1];
    const [node, i] = top;
    if (i < node.edges.length && !boundary?.has(node)) {
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

export function backward(root: Tensor, grad: Tensor | undefined, ops: SweepOps): void {
  sweeps++;
  sweep(root, grad, ops, 'backward()', (leaf, g) => accumulateLeaf(leaf, g, ops.copyInto));
}

/**
 * torch.autograd.grad: the gradients of root with respect to `inputs` (tensors that require grad, leaves or not),
 * returned instead of accumulated into .grad; undefined where no gradient reaches an input. The graph between root
 * and the inputs is swept once (its saved tensors are released); leaves outside `inputs` are left alone.
 */
export function gradients(root: Tensor, inputs: readonly Tensor[], grad: Tensor, ops?: Pick<SweepOps, 'ones'>): (Tensor | undefined)[];
export function gradients(root: Tensor, inputs: readonly Tensor[], grad: Tensor | undefined, ops: Pick<SweepOps, 'ones'>): (Tensor | undefined)[];
export function gradients(root: Tensor, inputs: readonly Tensor[], grad: Tensor | undefined, ops?: Pick<SweepOps, 'ones'>): (Tensor | undefined)[] {
  const found = new Map<Tensor, Tensor>();
  const byNode = new Map<GradNode, Tensor>();
  for (const x of inputs) {
    if (!x.requiresGrad) throw new DTypeError(`grad(): input ${x.describe()} does not require grad`);
    if (x.gradFn) byNode.set(x.gradFn, x);
  }
  const collect = (x: Tensor, g: Tensor) => {
    const prev = found.get(x);
    if (!prev) found.set(x, g);
    else {
      found.set(x, prev.add(g));
      prev.dispose();
      g.dispose();
    }
  };
  const wanted = new Set(inputs);
  const stop = { nodes: new Set(byNode.keys()), take: (node: GradNode, g: Tensor) => collect(byNode.get(node)!, g) };
  sweep(root, grad, ops, 'grad()', (leaf, g) => (wanted.has(leaf) ? collect(leaf, g) : g.dispose()), stop);
  const given = new Set<Tensor>();
  return inputs.map((x) => {
    const g = found.get(x);
    if (!g || !given.has(g)) return g && (given.add(g), g);
    // An input passed twice gets its gradient twice, each its own tensor.
    return noGrad(() => g.clone());
  });
}

/**
 * The reverse sweep from root: each node's rule once, in reverse topological order; a leaf's gradient goes to
 * `leaf`, and a node `stop` takes (an input of grad()) is not swept past.
 */
function sweep(
  root: Tensor,
  grad: Tensor | undefined,
  ops: Pick<SweepOps, 'ones'> | undefined,
  what: string,
  leaf: (leaf: Tensor, g: Tensor) => void,
  stop?: { nodes: ReadonlySet<GradNode>; take: (node: GradNode, g: Tensor) => void },
): void {
  if (!root.requiresGrad) throw new DTypeError(`${what} of ${root.describe()}: it does not require grad (no input of the ops that made it does)`);
  if (!grad && root.numel !== 1) throw new ShapeError(`${what} of ${root.describe()} needs a gradient argument: only a one-element tensor has an implicit one`);
  if (grad && (grad.shape.length !== root.shape.length || grad.shape.some((s, i) => s !== root.shape[i]))) {
    const arg = what === 'backward()' ? 'backward(grad): grad' : 'grad(output, inputs, gradOutput): gradOutput';
    throw new ShapeError(`${arg} has shape ${formatShape(grad.shape)}, the tensor ${formatShape(root.shape)}`);
  }
  noGrad(() => {
    // to() copies, so the sweep consumes its own seed and never the caller's gradient.
    const seed = grad ? grad.to(root.dtype) : ops!.ones(root.shape, { dtype: root.dtype, device: root.device });
    const node = root.gradFn;
    if (!node) {
      leaf(root, seed);
      return;
    }
    const grads = new Map<GradNode, Tensor>([[node, seed]]);
    for (const n of topologicalOrder(node, stop?.nodes)) {
      const g = grads.get(n);
      grads.delete(n);
      if (!g) {
        n.release();
        continue;
      }
      if (stop?.nodes.has(n)) {
        // An input of grad(): its gradient is taken here, and the graph behind it is left for later sweeps.
        stop.take(n, g);
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
        else leaf(edge.leaf!, c);
      });
    }
  });
}
