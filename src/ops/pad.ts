// torch F.pad as one op: constant, replicate and reflect padding of any rank in a single kernel, never a chain of
// per-dim copies (the PyTorch MPS VAE decode issued thousands of separate pad calls).
import { runKernel } from '../kernels/registry.js';
import type { PadMode } from '../runtime/backend.js';
import { ShapeError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import { commonBackend, wrap } from './util.js';

export type { PadMode } from '../runtime/backend.js';

export interface PadOptions {
  /** Default 'constant'. */
  mode?: PadMode;
  /** The fill of constant mode (default 0), converted to x's dtype; the other modes take none. */
  value?: number;
}

/**
 * torch.nn.functional.pad: `pads` lists (before, after) pairs from the last dim backwards, as torch does
 * ([left, right, top, bottom, front, back] for a 5-D [N, C, T, H, W]); fewer pairs leave the leading dims alone.
 * Any dtype and rank, one dispatch. Constant mode takes negative pads (cropping); reflect needs each pad smaller
 * than its dim, replicate a non-empty dim. Returns a new contiguous tensor.
 */
export function pad(x: Tensor, pads: readonly number[], options: PadOptions = {}): Tensor {
  const backend = commonBackend('pad', x);
  const mode = options.mode ?? 'constant';
  if (mode !== 'constant' && mode !== 'replicate' && mode !== 'reflect')
    throw new RangeError(`pad: unknown mode '${String(mode)}' (expected constant, replicate or reflect)`);
  if (mode !== 'constant' && options.value !== undefined) throw new RangeError(`pad: mode '${mode}' takes no value (got ${options.value})`);
  if (pads.length % 2 !== 0 || pads.length / 2 > x.ndim) {
    throw new ShapeError(`pad: pads [${pads.join(', ')}] must be (before, after) pairs for at most ${x.ndim} dims of ${x.describe()}`);
  }
  if (!pads.every(Number.isInteger)) throw new ShapeError(`pad: pads [${pads.join(', ')}] must be integers`);
  const before = new Array<number>(x.ndim).fill(0);
  const outShape = [...x.shape];
  for (let j = 0; j < pads.length / 2; j++) {
    const d = x.ndim - 1 - j;
    const [b, a] = [pads[2 * j], pads[2 * j + 1]];
    const size = x.shape[d];
    before[d] = b;
    outShape[d] = size + b + a;
    if (mode === 'constant') {
      if (outShape[d] < 0)
        throw new ShapeError(`pad: padding (${b}, ${a}) of dim ${d} (size ${size}) of ${x.describe()} leaves a negative size ${outShape[d]}`);
      continue;
    }
    if (b < 0 || a < 0) throw new ShapeError(`pad: negative padding (${b}, ${a}) of dim ${d} crops, which only constant mode does; got mode '${mode}'`);
    if (mode === 'reflect' && (b >= size || a >= size)) {
      throw new ShapeError(`pad: reflect padding (${b}, ${a}) of dim ${d} must be smaller than its size ${size} (${x.describe()})`);
    }
    if (mode === 'replicate' && size === 0 && b + a > 0) throw new ShapeError(`pad: replicate cannot pad the empty dim ${d} of ${x.describe()}`);
  }
  if (x.ndim === 0)
    return wrap(
      backend,
      runKernel('pad', backend, { x: { ...x.operand(), view: { shape: [1], strides: [1], offset: x.offset } }, before: [0], outShape: [1], mode, value: 0 }),
      x.dtype,
      [],
    );
  const value = options.value ?? 0;
  if (typeof value !== 'number') throw new RangeError(`pad: value must be a number, got ${String(value)}`);
  const handle = runKernel('pad', backend, { x: x.operand(), before, outShape, mode, value });
  return wrap(backend, handle, x.dtype, outShape);
}
