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

/** Walks the graph behind root, stopping at the inputs (their nodes, or themselves where they are leaves). */
export function regionGraph(root: Tensor, inputs: readonly Tensor[]): RegionGraph {
  const boundary = new Set<GradNode>(inputs.flatMap((t) => (t.gradFn ? [t.gradFn] : [])));
  const inputLeaves = new Set(inputs);
  const saved: Tensor[] = [];
  const leaves: Tensor[] = [];
  const seenLeaves = new Set<Tensor>();
  const seen = new Set<GradNode>();
  const stack = root.gradFn ? [root.gradFn] : [];
  while (stack.length) {
    const node = stack.pop()!;
    if (seen.has(node) || boundary.has(node)) continue;
    seen.add(node);
    saved.push(...node.saved);
    for (const edge of node.edges) {
      if (edge?.node) stack.push(edge.node);
      else if (edge?.leaf && !inputLeaves.has(edge.leaf) && !seenLeaves.has(edge.leaf)) {
        seenLeaves.add(edge.leaf);
        leaves.push(edge.leaf);
      }
    }
  }
  return { saved, leaves };
}

/** Releases what the graph behind root saved, up to the inputs' nodes (a graph its backward will not sweep). */
export function releaseGraph(root: Tensor, inputs: readonly Tensor[]): void {
  const boundary = new Set<GradNode>(inputs.flatMap((t) => (t.gradFn ? [t.gradFn] : [])));
  const seen = new Set<GradNode>();
  const stack = root.gradFn ? [root.gradFn] : [];
  while (stack.length) {
    const node = stack.pop()!;
    if (seen.has(node) || boundary.has(node)) continue;
    seen.add(node);
    node.release();
    for (const edge of node.edges) if (edge?.node) stack.push(edge.node);
  }
}
