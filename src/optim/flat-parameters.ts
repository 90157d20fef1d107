// Multi-tensor apply without binding many buffers: parameters made as views of one float32 storage, their
// gradients written by backward into views of a second one at the same offsets (Tensor.gradBuffer). An optimizer
// over such a set updates the whole span in one dispatch, whatever the number of tensors (torch's fused/foreach
// optimizers get the same effect by passing tensor lists to one kernel; WebGPU's few storage bindings per
// dispatch rule that out).
import { noGrad } from '../autograd/grad-mode.js';
import { DeviceMismatchError, DTypeError } from '../core/errors.js';
import { keep, tidy } from '../core/scope.js';
import { Tensor } from '../core/tensor.js';
import { zeros } from '../ops/creation.js';
import { copyInto } from '../ops/shape-ops.js';

/**
 * Leaf parameters (requiring grad) holding `values`' contents, as views of one arena, with gradient slots in a
 * second arena. The values are copied (the caller keeps and may dispose them); float32, one device.
 */
export function flatParameters(values: readonly Tensor[]): Tensor[] {
  if (values.length === 0) return [];
  const device = values[0].device;
  values.forEach((v, i) => {
    if (v.device !== device) throw new DeviceMismatchError(`flatParameters: value ${i} is on ${v.device}, value 0 on ${device}`);
    if (v.dtype !== 'float32') throw new DTypeError(`flatParameters: value ${i} is ${v.describe()}; flat parameters are float32`);
  });
  const total = values.reduce((n, v) => n + v.numel, 0);
  return noGrad(() =>
    tidy(() => {
      const arena = zeros([total], { device });
      const grads = zeros([total], { device });
      let at = 0;
      return values.map((v) => {
        const p = keep(arena.narrow(0, at, v.numel).reshape(v.shape));
        copyInto(p, v);
        p.gradBuffer = keep(grads.narrow(0, at, v.numel).reshape(v.shape));
        at += v.numel;
        return p.requiresGrad_();
      });
    }),
  );
}

/** The span a parameter list tiles in one arena, with its gradient span: what one fused update can cover. */
export interface FlatSpan {
  /** 1-D views over the parameters' and the gradient slots' common ranges. */
  readonly params: Tensor;
  readonly grads: Tensor;
  /** Each parameter's offset into the span, in the parameter list's order. */
  readonly offsets: readonly number[];
}

/** Whether every parameter has a gradient, and it is the one backward wrote into its slot of the span's arena. */
export function gradsInSpan(params: readonly Tensor[], span: FlatSpan): boolean {
  return params.every((p) => p.grad !== undefined && p.grad.storage === span.grads.storage && p.grad.offset === p.gradBuffer!.offset);
}

/** The flat span of params, when they tile one float32 storage back to back and their gradient slots likewise. */
export function flatSpan(params: readonly Tensor[]): FlatSpan | undefined {
  if (params.length < 2) return undefined;
  const first = params[0];
  const slots = params.map((p) => p.gradBuffer);
  if (slots.some((g) => !g)) return undefined;
  const order = params.map((_, i) => i).sort((a, b) => params[a].offset - params[b].offset);
  const base = params[order[0]].offset;
  const gradBase = slots[order[0]]!.offset;
  let end = base;
  for (const i of order) {
    const p = params[i];
    const g = slots[i]!;
    const ok =
      p.dtype === 'float32' &&
      g.dtype === 'float32' &&
      p.storage === first.storage &&
      g.storage === slots[0]!.storage &&
      p.isContiguous() &&
      g.isContiguous() &&
      p.offset === end &&
      g.offset - gradBase === p.offset - base;
    if (!ok) return undefined;
    end += p.numel;
  }
  const span = (t: Tensor, offset: number) => keep(new Tensor(t.storage, { shape: [end - base], strides: [1], offset }, 'float32'));
  return { params: span(first, base), grads: span(slots[0]!, gradBase), offsets: params.map((p) => p.offset - base) };
}
