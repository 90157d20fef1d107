// torch.nn.utils.clip_grad_norm_: the norm of every gradient together, then each gradient scaled in place by
// min(1, maxNorm / (norm + 1e-6)). On the GPU the norm and the coefficient never leave the device (nothing is read
// back, so a training step stays one submit); the norm comes back as a 0-d float32 tensor to read when wanted.
import { runKernel } from '../kernels/registry.js';
import { backendFor, getDefaultDevice } from '../runtime/registry.js';
import { DeviceMismatchError, DTypeError } from '../core/errors.js';
import { keep } from '../core/scope.js';
import { Tensor } from '../core/tensor.js';
import { noGrad } from '../autograd/grad-mode.js';
import { flatSpan, gradsInSpan } from './flat-parameters.js';
import type { Storage } from '../core/storage.js';

export interface ClipGradNormOptions {
  /** 1, 2 (default) or Infinity. */
  normType?: number;
}

/**
 * Clips the gradients of params (those without one are skipped) to a total norm of at most maxNorm, in place,
 * and returns the total norm before clipping. A gradient that is a strided view, or that shares its storage with
 * another one in the list (autograd hands `a + b`'s inputs views of one gradient), is first replaced by its own
 * contiguous copy, so each is scaled exactly once.
 */
export function clipGradNorm(params: Tensor | readonly Tensor[], maxNorm: number, options: ClipGradNormOptions = {}): Tensor {
  const list = params instanceof Tensor ? [params] : params;
  const normType = options.normType ?? 2;
  if (normType !== 1 && normType !== 2 && normType !== Infinity) throw new RangeError(`clipGradNorm: normType ${normType} is not supported (1, 2 or Infinity)`);
  if (Number.isNaN(maxNorm)) throw new RangeError('clipGradNorm: maxNorm is NaN');
  const withGrad = list.filter((p) => p.grad !== undefined);
  if (withGrad.length === 0) {
    const backend = list.length > 0 ? list[0].storage.backend : backendFor(getDefaultDevice());
    return Tensor.fromHandle(backend, backend.fill('float32', 1, 0), 'float32', []);
  }
  const backend = withGrad[0].grad!.storage.backend;
  // Gradients in one arena (flatParameters) are clipped as the one span they tile.
  const span = withGrad.length === list.length ? flatSpan(list) : undefined;
  if (span) {
    try {
      if (gradsInSpan(list, span)) {
        const norm = runKernel('clipGradNorm', backend, { grads: [span.grads.operand()], maxNorm, normType });
        span.grads.storage.version++;
        return Tensor.fromHandle(backend, norm, 'float32', []);
      }
    } finally {
      span.params.dispose();
      span.grads.dispose();
    }
  }
  const seen = new Set<Storage>();
  noGrad(() => {
    withGrad.forEach((p, i) => {
      const g = p.grad!;
      if (g.storage.backend !== backend)
        throw new DeviceMismatchError(`clipGradNorm: gradients on ${withGrad[0].grad!.device} and ${g.device} (parameter ${i})`);
      if (!['float32', 'float16', 'bfloat16'].includes(g.dtype)) throw new DTypeError(`clipGradNorm: gradient ${i} is ${g.describe()}`);
      if (!g.isContiguous() || seen.has(g.storage)) {
        p.grad = keep(g.clone());
        g.dispose();
      }
      seen.add(p.grad!.storage);
    });
  });
  const grads = withGrad.map((p) => p.grad!);
  const norm = runKernel('clipGradNorm', backend, { grads: grads.map((g) => g.operand()), maxNorm, normType });
  for (const g of grads) g.storage.version++;
  return Tensor.fromHandle(backend, norm, 'float32', []);
}
