// Layout ops composed of views and existing kernels (tinygrad style): stack is unsqueeze + cat, split / chunk are
// narrow views, repeat is expand + a copy, flip is indexSelect with a reversed arange, tril / triu are a where over
// an arange comparison, and masked_fill is a where. Each inherits its parts' autograd.
import { DTypeError, ShapeError } from '../core/errors.js';
import { formatShape, normalizeDim } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { arange } from './creation.js';
import { cast } from './convert.js';
import { le, ge, sub, where } from './elementwise.js';
import { indexSelect } from './index-select.js';
import { cat, expand, narrow, reshape, unsqueeze } from './shape-ops.js';

/** torch.stack: the tensors (one shape) joined along a new dim. */
export function stack(tensors: readonly Tensor[], dim = 0): Tensor {
  if (tensors.length === 0) throw new ShapeError('stack: expects a non-empty list of tensors');
  const first = tensors[0];
  for (const t of tensors) {
    if (t.ndim !== first.ndim || t.shape.some((s, i) => s !== first.shape[i]))
      throw new ShapeError(`stack: every tensor must have one shape, got ${first.describe()} and ${t.describe()}`);
  }
  const d = normalizeDim(dim, first.ndim + 1);
  const parts = tensors.map((t) => unsqueeze(t, d));
  try {
    return cat(parts, d);
  } finally {
    parts.forEach((p) => p.dispose());
  }
}

/**
 * torch.split: views along dim, each `sizeOrSections` long (the last shorter), or of the given sizes (which must add
 * up to the dim's size).
 */
export function split(x: Tensor, sizeOrSections: number | readonly number[], dim = 0): Tensor[] {
  if (x.ndim === 0) throw new ShapeError('split: cannot split a 0-d tensor');
  const d = normalizeDim(dim, x.ndim);
  const size = x.shape[d];
  let sizes: number[];
  if (typeof sizeOrSections === 'number') {
    if (!Number.isInteger(sizeOrSections) || sizeOrSections < 0 || (sizeOrSections === 0 && size > 0))
      throw new ShapeError(`split: split size must be a positive integer, got ${sizeOrSections}`);
    sizes = [];
    for (let at = 0; at < size; at += sizeOrSections) sizes.push(Math.min(sizeOrSections, size - at));
    if (sizes.length === 0) sizes.push(0);
  } else {
    sizes = [...sizeOrSections];
    const total = sizes.reduce((a, b) => a + b, 0);
    if (sizes.some((s) => !Number.isInteger(s) || s < 0) || total !== size)
      throw new ShapeError(`split: sizes ${JSON.stringify(sizes)} must be integers >= 0 adding up to ${size} (dim ${d} of ${x.describe()})`);
  }
  let at = 0;
  return sizes.map((s) => {
    const part = narrow(x, d, at, s);
    at += s;
    return part;
  });
}

/** torch.chunk: up to `chunks` views along dim, each ceil(size / chunks) long (the last shorter; fewer when they run out). */
export function chunk(x: Tensor, chunks: number, dim = 0): Tensor[] {
  if (!Number.isInteger(chunks) || chunks < 1) throw new ShapeError(`chunk: chunks must be an integer >= 1, got ${chunks}`);
  if (x.ndim === 0) throw new ShapeError('chunk: cannot chunk a 0-d tensor');
  const size = x.shape[normalizeDim(dim, x.ndim)];
  return split(x, Math.max(1, Math.ceil(size / chunks)), dim);
}

/** torch.flip: the order of elements reversed along each of dims (a copy, as torch's). */
export function flip(x: Tensor, dims: number | readonly number[]): Tensor {
  const list = typeof dims === 'number' ? [dims] : dims;
  const ds = list.map((d) => normalizeDim(d, Math.max(x.ndim, 1)));
  if (new Set(ds).size !== ds.length) throw new ShapeError(`flip: dims ${JSON.stringify(list)} name a dim twice`);
  if (x.ndim === 0 || ds.length === 0) return x.clone();
  let r = x;
  for (const d of ds) {
    const n = x.shape[d];
    const index = arange(n - 1, -1, -1, { device: x.device });
    const next = indexSelect(r, d, index);
    index.dispose();
    if (r !== x) r.dispose();
    r = next;
  }
  return r;
}

/**
 * torch.Tensor.repeat: the tensor tiled `repeats[i]` times along dim i (more repeats than dims add leading dims):
 * x viewed as [1, s0, 1, s1, ...], expanded to [r0, s0, r1, s1, ...] and copied to [r0 s0, r1 s1, ...].
 */
export function repeat(x: Tensor, repeats: readonly number[]): Tensor {
  if (repeats.length < x.ndim) throw new ShapeError(`repeat: ${repeats.length} repeats for ${x.describe()}: give at least one per dim (${x.ndim})`);
  if (repeats.some((r) => !Number.isInteger(r) || r < 0)) throw new ShapeError(`repeat: repeats must be integers >= 0, got ${JSON.stringify(repeats)}`);
  const shape = [...new Array<number>(repeats.length - x.ndim).fill(1), ...x.shape];
  const interleaved = shape.flatMap((s) => [1, s]);
  const expanded = repeats.flatMap((r, i) => [r, shape[i]]);
  const v = reshape(x, interleaved);
  const e = expand(v, expanded);
  const r = reshape(
    e,
    repeats.map((n, i) => n * shape[i]),
  );
  v.dispose();
  e.dispose();
  return r;
}

/** The [rows, cols] mask col - row <= diagonal (lower) or >= diagonal (upper), on x's device. */
function triangle(x: Tensor, diagonal: number, lower: boolean, op: string): Tensor {
  if (x.ndim < 2) throw new ShapeError(`${op}: needs at least 2 dims, got ${x.describe()}`);
  if (!Number.isInteger(diagonal)) throw new ShapeError(`${op}: diagonal must be an integer, got ${diagonal}`);
  const [rows, cols] = x.shape.slice(-2);
  const r = arange(rows, undefined, 1, { device: x.device });
  const c = arange(cols, undefined, 1, { device: x.device });
  const rc = reshape(r, [rows, 1]);
  const offset = sub(c, rc);
  const mask = lower ? le(offset, diagonal) : ge(offset, diagonal);
  for (const t of [r, c, rc, offset]) t.dispose();
  const out = where(mask, x, 0);
  mask.dispose();
  if (out.dtype === x.dtype) return out;
  const back = cast(out, x.dtype);
  out.dispose();
  return back;
}

/** torch.tril: the lower triangle of the last two dims (col - row <= diagonal), the rest zero. */
export const tril = (x: Tensor, diagonal = 0) => triangle(x, diagonal, true, 'tril');
/** torch.triu: the upper triangle of the last two dims (col - row >= diagonal), the rest zero. */
export const triu = (x: Tensor, diagonal = 0) => triangle(x, diagonal, false, 'triu');

/** torch.masked_fill: value where mask (bool, broadcast to x) is true, else x; x's dtype is kept. */
export function maskedFill(x: Tensor, mask: Tensor, value: number | Tensor): Tensor {
  if (mask.dtype !== 'bool') throw new DTypeError(`maskedFill: mask must be bool, got ${mask.describe()}`);
  if (typeof value !== 'number' && value.ndim !== 0) throw new ShapeError(`maskedFill: value must be a number or a 0-d tensor, got ${value.describe()}`);
  const out = where(mask, value, x);
  if (out.shape.length !== x.shape.length || out.shape.some((s, i) => s !== x.shape[i])) {
    out.dispose();
    throw new ShapeError(`maskedFill: mask ${formatShape(mask.shape)} must broadcast to x ${formatShape(x.shape)}`);
  }
  if (out.dtype === x.dtype) return out;
  const back = cast(out, x.dtype);
  out.dispose();
  return back;
}
