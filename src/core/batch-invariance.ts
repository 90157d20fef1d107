// Batch-invariant kernel choice, scoped: inside withBatchInvariance, kernels whose reduction order could depend on
// how many rows share a call (the decode GEMV switching to the tiled GEMM past 4 rows, the expert GEMV switching to
// the grouped GEMM past 32 slots) keep one per-row form for every row count, so a row's result is the same bits
// whether it ran alone or beside others. The continuous-batching server runs its decode steps so (the idea of
// PyTorch's deterministic-algorithms switch, scoped to a block).
let depth = 0;

export function withBatchInvariance<T>(fn: () => T): T {
  depth++;
  try {
    return fn();
  } finally {
    depth--;
  }
}

/** True inside withBatchInvariance. */
export function batchInvariant(): boolean {
  return depth > 0;
}
