// The graph a compiled forward leaves behind, read once at trace time: which tensors its backward reads (saved by
// the ops' nodes) and which closed-over leaves (weights) its gradient reaches. compile() makes the first the
// forward program's extra outputs and the second the outer node's edges, so the backward can be compiled too.
import type { GradNode } from '../autograd/node.js';
import type { Tensor } from '../core/tensor.js';

export interface RegionGraph {
  /** Tensors the region's nodes saved for their rules, in node order. */
  readonly saved: readonly Tensor[];
  /** Leaves the gradient reaches that are not inputs of the call (closed-over weights), in first-seen order. */
  readonly leaves: readonly Tensor[];
}

/** Each node behind root once, stopping at the inputs' nodes (the graph before the call is not the region's). */
function forEachNode(root: Tensor, inputs: readonly Tensor[], visit: (node: GradNode) => void): void {
  const boundary = new Set<GradNode>(inputs.flatMap((t) => (t.gradFn ? [t.gradFn] : [])));
  const seen = new Set<GradNode>();
  const stack = root.gradFn ? [root.gradFn] : [];
  while (stack.length) {
    const node = stack.pop()!;
    if (seen.has(node) || boundary.has(node)) continue;
    seen.add(node);
    visit(node);
    for (const edge of node.edges) if (edge?.node) stack.push(edge.node);
  }
}

/** What the region behind root saved, and the leaves it reaches other than the inputs (which are leaves themselves or stop it). */
export function regionGraph(root: Tensor, inputs: readonly Tensor[]): RegionGraph {
  const inputLeaves = new Set(inputs);
  const saved: Tensor[] = [];
  const leaves = new Set<Tensor>();
  forEachNode(root, inputs, (node) => {
    saved.push(...node.saved);
    for (const edge of node.edges) if (edge?.leaf && !inputLeaves.has(edge.leaf)) leaves.add(edge.leaf);
  });
  return { saved, leaves: [...leaves] };
}

/** Releases what the graph behind root saved, up to the inputs' nodes (a graph its backward will not sweep). */
export function releaseGraph(root: Tensor, inputs: readonly Tensor[]): void {
  forEachNode(root, inputs, (node) => node.release());
}
