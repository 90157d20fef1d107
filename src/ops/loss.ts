// Losses. crossEntropy computes the log-softmax over the classes once: the forward keeps it (float32) for the
// backward, whose gradient is softmax - onehot, so the vocabulary-wide softmax is never materialized twice.
import { DTypeError, ShapeError } from '../core/errors.js';
import { formatShape } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { noGrad } from '../autograd/grad-mode.js';
import { tidy } from '../core/scope.js';
import { needsGrad, record } from '../autograd/node.js';
import { arange } from './creation.js';
import { where } from './elementwise.js';
import { gather } from './index-select.js';
import { logSoftmax } from './softmax.js';
import { float32 } from '../autograd/rules.js';

export interface CrossEntropyOptions {
  /** Targets equal to this are skipped (and not counted by the mean), as torch's ignore_index. Default -100. */
  ignoreIndex?: number;
  /** 'mean' over the targets not ignored (default), 'sum', or 'none' (one loss per row). */
  reduction?: 'mean' | 'sum' | 'none';
}

/**
 * torch.nn.functional.cross_entropy of logits [N, C] (or [..., C]) against int32 class targets [N] (or [...]):
 * -log_softmax(logits)[target], reduced. A mean over zero counted targets is NaN, as in PyTorch.
 */
export function crossEntropy(logits: Tensor, targets: Tensor, options: CrossEntropyOptions = {}): Tensor {
  const ignore = options.ignoreIndex ?? -100;
  const reduction = options.reduction ?? 'mean';
  if (targets.dtype !== 'int32') throw new DTypeError(`crossEntropy: targets must be int32 class indices, got ${targets.describe()}`);
  if (logits.ndim < 1 || targets.shape.join() !== logits.shape.slice(0, -1).join()) {
    throw new ShapeError(`crossEntropy: targets ${formatShape(targets.shape)} must be logits ${formatShape(logits.shape)} without its class dim`);
  }
  const classes = logits.shape[logits.ndim - 1];
  const rows = targets.numel;
  const parts = noGrad(() => tidy(() => {
    const lsm = logSoftmax(float32(logits.reshape(rows, classes)), -1);
    const t = targets.reshape(rows);
    const keep = t.ne(ignore);
    const safe = where(keep, t, 0);
    const valid = keep.to('float32');
    const nll = gather(lsm, 1, safe.reshape(rows, 1)).reshape(rows).neg().mul(valid);
    const out = reduction === 'none' ? nll.reshape(targets.shape) : reduction === 'sum' ? nll.sum() : nll.sum().div(valid.sum());
    return { lsm, safe, valid, out: out.to(logits.dtype) };
  }));
  const { lsm, safe, valid, out } = parts;
  try {
    if (!needsGrad(logits)) return out;
    return record(out, 'crossEntropy', [logits], [lsm, safe, valid], (g, [l, s, v]) => {
      // d logits = (softmax - onehot(target)) * valid * dL/dnll (1/count for the mean).
      const g32 = float32(g);
      const perRow = reduction === 'none' ? g32.reshape(rows, 1) : reduction === 'sum' ? g32 : g32.div(v.sum());
      const oneHot = arange(0, classes, 1, { device: s.device }).reshape(1, classes).eq(s.reshape(rows, 1)).to('float32');
      const d = l.exp().sub(oneHot).mul(v.reshape(rows, 1)).mul(perRow);
      return [d.reshape(logits.shape)];
    });
  } finally {
    lsm.dispose();
    safe.dispose();
    valid.dispose();
  }
}
