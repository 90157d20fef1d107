// Losses. crossEntropy is two backend ops: the forward reads each row of logits once and keeps only its float32
// logsumexp [N]; the backward writes d logits = softmax - onehot straight from the logits and that lse, so no
// [N, V] softmax, log-softmax or one-hot is ever stored, and none lives between forward and backward.
import { runKernel } from '../kernels/registry.js';
import { DTypeError, ShapeError } from '../core/errors.js';
import { isFloating } from '../core/dtype.js';
import { formatShape } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { noGrad } from '../autograd/grad-mode.js';
import { tidy } from '../core/scope.js';
import { needsGrad, record } from '../autograd/node.js';
import { float32 } from './grad-rules.js';
import { commonBackend, wrap } from './util.js';

export interface CrossEntropyOptions {
  /** Targets equal to this are skipped (and not counted by the mean), as torch's ignore_index. Default -100. */
  ignoreIndex?: number;
  /** 'mean' over the targets not ignored (default), 'sum', or 'none' (one loss per row). */
  reduction?: 'mean' | 'sum' | 'none';
}

/**
 * torch.nn.functional.cross_entropy of logits [N, C] (or [..., C], any float dtype) against int32 class targets [N]
 * (or [...]): -log_softmax(logits)[target], reduced; the loss has the logits' dtype. A mean over zero counted
 * targets is NaN, as in PyTorch, and so is the loss of a row holding a NaN. A target outside [0, C) that is not
 * ignoreIndex raises an IndexError (a ShapeError) naming it: at once on the CPU, at the next read back or
 * synchronize() on WebGPU (the device error flag).
 */
export function crossEntropy(logits: Tensor, targets: Tensor, options: CrossEntropyOptions = {}): Tensor {
  const ignore = options.ignoreIndex ?? -100;
  const reduction = options.reduction ?? 'mean';
  const backend = commonBackend('crossEntropy', logits, targets);
  if (targets.dtype !== 'int32') throw new DTypeError(`crossEntropy: targets must be int32 class indices, got ${targets.describe()}`);
  if (!isFloating(logits.dtype)) throw new DTypeError(`crossEntropy: logits must be floating, got ${logits.describe()}`);
  if (logits.ndim < 1 || targets.shape.join() !== logits.shape.slice(0, -1).join()) {
    throw new ShapeError(`crossEntropy: targets ${formatShape(targets.shape)} must be logits ${formatShape(logits.shape)} without its class dim`);
  }
  if (!Number.isInteger(ignore)) throw new DTypeError(`crossEntropy: ignoreIndex must be an integer, got ${ignore}`);
  const classes = logits.shape[logits.ndim - 1];
  const rows = targets.numel;
  const parts = noGrad(() =>
    tidy(() => {
      const t = targets.reshape(rows);
      const [lseH, nllH] = runKernel('crossEntropyForward', backend, {
        logits: logits.reshape(rows, classes).operand(),
        targets: t.operand(),
        ignoreIndex: ignore,
      });
      const lse = wrap(backend, lseH, 'float32', [rows]);
      const nll = wrap(backend, nllH, 'float32', [rows]);
      // The counted targets, for the mean and its gradient (int64: sum of a bool).
      const count = reduction === 'mean' ? t.ne(ignore).sum() : undefined;
      const loss = reduction === 'none' ? nll.reshape(targets.shape) : count ? nll.sum().div(count) : nll.sum();
      return { lse, count, out: loss.dtype === logits.dtype ? loss : loss.to(logits.dtype) };
    }),
  );
  const { lse, count, out } = parts;
  try {
    if (!needsGrad(logits)) return out;
    // Saved: the logits (alive anyway), the targets, lse [N] and the count: O(N) beyond what the caller holds.
    return record(out, 'crossEntropy', [logits], [logits, targets, lse, ...(count ? [count] : [])], (g, [l, tg, ls, c]) => [
      tidy(() => {
        // The upstream gradient per row: g itself for 'none', broadcast (stride 0) for 'sum', g / count for 'mean'.
        const perRow = reduction === 'none' ? g.reshape(rows) : (reduction === 'sum' ? g : float32(g).div(c)).reshape(1).expand([rows]);
        const x = l.reshape(rows, classes);
        const d = runKernel('crossEntropyBackward', backend, {
          logits: x.operand(),
          targets: tg.reshape(rows).operand(),
          lse: ls.operand(),
          rowScale: perRow.operand(),
          ignoreIndex: ignore,
          outDtype: logits.dtype,
        });
        return wrap(backend, d, logits.dtype, logits.shape);
      }),
    ]);
  } finally {
    lse.dispose();
    count?.dispose();
  }
}
