import { DTypeError, ShapeError } from '../core/errors.js';
import { broadcastShapes, broadcastView, formatShape } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { reshape, unsqueeze } from './shape-ops.js';
import { commonBackend, requireDTypes, wrap } from './util.js';

const MATMUL_DTYPES = ['float32', 'float16', 'bfloat16'] as const;

/**
 * torch.matmul: [..., m, k] @ [..., k, n] with broadcast batch dims; 1-D operands gain and then lose a dim.
 * Accumulates in float32 whatever the input dtype; FP8 operands go through scaledMm instead.
 */
export function matmul(x: Tensor, y: Tensor): Tensor {
  const backend = commonBackend('matmul', x, y);
  requireDTypes('matmul', x, MATMUL_DTYPES);
  requireDTypes('matmul', y, MATMUL_DTYPES);
  if (x.dtype !== y.dtype) throw new DTypeError(`matmul: both operands must have one dtype, got ${x.describe()} and ${y.describe()}`);
  if (x.ndim === 0 || y.ndim === 0) throw new ShapeError(`matmul: both operands need at least 1 dim, got ${formatShape(x.shape)} and ${formatShape(y.shape)}`);
  const a = x.ndim === 1 ? unsqueeze(x, 0) : x;
  const b = y.ndim === 1 ? unsqueeze(y, 1) : y;
  try {
    const [m, k] = a.shape.slice(-2);
    const [k2, n] = b.shape.slice(-2);
    if (k !== k2) throw new ShapeError(`matmul: inner dims differ: ${formatShape(x.shape)} @ ${formatShape(y.shape)} (${k} vs ${k2})`);
    const batch = broadcastShapes(a.shape.slice(0, -2), b.shape.slice(0, -2));
    const opA = { ...a.operand(), view: broadcastView(a.layout, [...batch, m, k]) };
    const opB = { ...b.operand(), view: broadcastView(b.layout, [...batch, k, n]) };
    const out = wrap(backend, backend.matmul(opA, opB, { batch, m, n, k }, x.dtype), x.dtype, [...batch, m, n]);
    if (x.ndim > 1 && y.ndim > 1) return out;
    // Drop the dim each 1-D operand gained (both for vector @ vector, giving a 0-d result as torch.matmul does).
    const squeezed = reshape(out, [...batch, ...(x.ndim > 1 ? [m] : []), ...(y.ndim > 1 ? [n] : [])]);
    out.dispose();
    return squeezed;
  } finally {
    if (a !== x) a.dispose();
    if (b !== y) b.dispose();
  }
}
