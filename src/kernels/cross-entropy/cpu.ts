// CPU references of the fused cross-entropy (forward: per-row logsumexp and nll; backward: d logits from them):
// float64 loops, the oracle for the WGSL kernels.
import type { StorageArray } from '../../core/codecs.js';
import type { DType } from '../../core/dtype.js';
import { IndexError } from '../../core/errors.js';
import type { Operand } from '../../runtime/backend.js';
import { ints, store, values } from '../../runtime/cpu/cpu-backend.js';

type Handle = StorageArray;

function checkTarget(target: number, row: number, classes: number, ignore: number): void {
  if (target !== ignore && (target < 0 || target >= classes || !Number.isInteger(target))) {
    throw new IndexError(`crossEntropy: target ${target} of row ${row} is out of range for ${classes} classes (ignoreIndex ${ignore})`, 'crossEntropy', target);
  }
}

/** Per row of logits [rows, classes]: lse = log(sum(exp(x))) and nll = lse - x[target] (0 where ignored). */
export function crossEntropyForwardReference(logits: Operand<Handle>, targets: Operand<Handle>, ignore: number): [Handle, Handle] {
  const [rows, classes] = logits.view.shape;
  const x = values(logits);
  const t = ints(targets);
  const lse = new Float64Array(rows);
  const nll = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    checkTarget(t[r], r, classes, ignore);
    const base = r * classes;
    let m = -Infinity;
    for (let j = 0; j < classes; j++) m = Number.isNaN(m) || Number.isNaN(x[base + j]) ? NaN : Math.max(m, x[base + j]);
    // exp(Inf - Inf) is NaN: a +Inf logit makes the row NaN, as torch's log_softmax; all -Inf too (0/0).
    let s = m === -Infinity ? NaN : 0;
    for (let j = 0; j < classes; j++) s += Math.exp(x[base + j] - m);
    const logSum = Math.log(s);
    lse[r] = m + logSum;
    nll[r] = t[r] === ignore ? 0 : m - x[base + t[r]] + logSum;
  }
  return [store(lse, 'float32'), store(nll, 'float32')];
}

/** d logits [rows, classes] in outDtype = (exp(x - lse[row]) - onehot(target)) * scale[row] (0 where ignored). */
export function crossEntropyBackwardReference(
  logits: Operand<Handle>,
  targets: Operand<Handle>,
  lse: Operand<Handle>,
  scale: Operand<Handle>,
  ignore: number,
  outDtype: DType,
): Handle {
  const [rows, classes] = logits.view.shape;
  const x = values(logits);
  const t = ints(targets);
  const l = values(lse);
  const g = values(scale);
  const out = new Float64Array(rows * classes);
  for (let r = 0; r < rows; r++) {
    checkTarget(t[r], r, classes, ignore);
    const ignored = t[r] === ignore;
    const s = ignored ? 0 : g[r];
    for (let j = 0; j < classes; j++) {
      const i = r * classes + j;
      out[i] = (Math.exp(x[i] - l[r]) - (!ignored && j === t[r] ? 1 : 0)) * s;
    }
  }
  return store(out, outDtype);
}
