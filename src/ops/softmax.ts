import { normalizeDim } from '../core/shape.js';
import { runKernel } from '../kernels/registry.js';
import type { Tensor } from '../core/tensor.js';
import { commonBackend, requireDTypes, wrap } from './util.js';
import { differentiable } from '../autograd/function.js';
import { softmaxBackward } from './grad-rules.js';

const SOFTMAX_DTYPES = ['float32', 'float16', 'bfloat16'] as const;

function softmaxOp(name: string, x: Tensor, dim: number, log: boolean): Tensor {
  const backend = commonBackend(name, x);
  requireDTypes(name, x, SOFTMAX_DTYPES);
  const d = normalizeDim(dim, x.ndim); // a 0-d tensor takes dim 0 or -1, as in torch
  if (x.ndim === 0)
    return wrap(
      backend,
      runKernel('softmax', backend, { x: { ...x.operand(), view: { shape: [1], strides: [1], offset: x.offset } }, dim: 0, log }),
      x.dtype,
      [],
    );
  return wrap(backend, runKernel('softmax', backend, { x: x.operand(), dim: d, log }), x.dtype, x.shape);
}

/**
 * torch.softmax along dim, computed in float32 with an online max/sum. On the GPU: one dispatch (an invocation per
 * row up to 64 values, else a workgroup per row) for rows up to 262144 values; a few longer rows are split across workgroups in two dispatches. A row of all
 * -Inf gives NaN, as in torch.
 */
export function softmax(x: Tensor, dim = -1): Tensor {
  return differentiable(
    'softmax',
    [x],
    () => softmaxOp('softmax', x, dim, false),
    (g, s) => [softmaxBackward(s.out!, g, dim)],
    { out: true },
  );
}

/** torch.log_softmax along dim: x - max - log(sum(exp(x - max))), dispatched as softmax is. */
export function logSoftmax(x: Tensor, dim = -1): Tensor {
  // dx = g - exp(y) sum(g) along dim.
  return differentiable(
    'logSoftmax',
    [x],
    () => softmaxOp('logSoftmax', x, dim, true),
    (g, s) => [g.sub(s.out!.exp().mul(g.sum(dim, { keepdim: true })))],
    { out: true },
  );
}
