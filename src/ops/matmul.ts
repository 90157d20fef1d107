import { DTypeError, ShapeError } from '../core/errors.js';
import { broadcastShapes, broadcastView, formatShape } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { compact, reshape, unsqueeze } from './shape-ops.js';
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

/**
 * A dense layer, torch.nn.functional.linear: x [..., K] @ weight[N, K]^T (+ bias [N]) -> [..., N] in x's dtype.
 * Unlike matmul, x and the weight may differ in dtype (e.g. float32 activations with a bfloat16 weight): the kernel
 * reads each in its own format and accumulates in float32, so no cast pass runs. Decode shapes (at most 4 rows)
 * take the GEMV path, reading every weight byte once. FP8 weights go through scaledMm.
 */
export function linear(x: Tensor, weight: Tensor, bias?: Tensor): Tensor {
  const backend = commonBackend('linear', x, weight, ...(bias ? [bias] : []));
  requireDTypes('linear', x, MATMUL_DTYPES);
  requireDTypes('linear', weight, MATMUL_DTYPES);
  if (weight.ndim !== 2) throw new ShapeError(`linear: weight must be [N, K], got ${formatShape(weight.shape)}`);
  const [n, k] = weight.shape;
  if (x.ndim === 0 || x.shape[x.ndim - 1] !== k) throw new ShapeError(`linear: x ${formatShape(x.shape)} does not end in K = ${k} of weight ${formatShape(weight.shape)}`);
  if (bias) {
    requireDTypes('linear', bias, MATMUL_DTYPES);
    if (bias.ndim !== 1 || bias.shape[0] !== n) throw new ShapeError(`linear: bias must have shape [${n}], got ${formatShape(bias.shape)}`);
  }
  const lead = x.shape.slice(0, -1);
  const m = lead.reduce((p, d) => p * d, 1);
  const rows = reshape(x, [m, k]);
  const b = bias && compact(bias);
  try {
    const wT = { ...weight.operand(), view: { shape: [k, n], strides: [weight.strides[1], weight.strides[0]], offset: weight.offset } };
    const handle = backend.matmul(rows.operand(), wT, { batch: [], m, n, k }, x.dtype, b ? { bias: b.operand() } : {});
    const out = wrap(backend, handle, x.dtype, [m, n]);
    if (lead.length === 1) return out;
    const shaped = reshape(out, [...lead, n]);
    out.dispose();
    return shaped;
  } finally {
    rows.dispose();
    b?.dispose();
  }
}
