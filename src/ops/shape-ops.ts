// View ops share storage (no kernel); reshape/contiguous copy only when the layout demands it.
import { ShapeError, DTypeError } from '../core/errors.js';
import { checkShape, contiguousStrides, formatShape, inferReshape, normalizeDim, numel, viewStrides, type View } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { commonBackend, viewOf, wrap } from './util.js';
import { zeros } from './creation.js';
import { differentiable } from '../autograd/function.js';
import { sumTo } from './grad-rules.js';
import { promoteTypes, type DType } from '../core/dtype.js';
import { cast } from './convert.js';

/** A contiguous copy when t is not contiguous; otherwise a new view of the same storage. */
export function contiguous(t: Tensor): Tensor {
  return differentiable(
    'contiguous',
    [t],
    () => (t.isContiguous() ? viewOf(t, t.layout) : cloneImpl(t)),
    (g) => [passThrough(g)],
  );
}

/**
 * t with offset 0 in compact row-major storage, for kernels that index small operands (scales, bias, token lists)
 * from element 0: a view when t already is, else a copy. The caller disposes the result either way.
 */
export function compact(t: Tensor): Tensor {
  return t.isContiguous() && t.offset === 0 ? viewOf(t, t.layout) : clone(t);
}

function cloneImpl(t: Tensor): Tensor {
  const backend = commonBackend('clone', t);
  return wrap(backend, backend.cast(t.operand(), t.dtype, false), t.dtype, t.shape);
}

function reshapeImpl(t: Tensor, shape: readonly number[]): Tensor {
  const target = inferReshape(t.shape, shape);
  const strides = viewStrides(t.layout, target);
  if (strides) return viewOf(t, { shape: target, strides, offset: t.offset });
  const c = cloneImpl(t);
  const r = viewOf(c, { shape: target, strides: contiguousStrides(target), offset: 0 });
  c.dispose();
  return r;
}

function viewImpl(t: Tensor, shape: readonly number[]): Tensor {
  const target = inferReshape(t.shape, shape);
  const strides = viewStrides(t.layout, target);
  if (!strides) {
    throw new ShapeError(
      `view ${formatShape(target)} is not compatible with the strides [${t.strides.join(', ')}] of ${t.describe()}; use reshape() (copies) or contiguous()`,
    );
  }
  return viewOf(t, { shape: target, strides, offset: t.offset });
}

function permuteImpl(t: Tensor, dims: readonly number[]): Tensor {
  if (dims.length !== t.ndim) throw new ShapeError(`permute: ${dims.length} dims given for a tensor of rank ${t.ndim}`);
  const norm = dims.map((d) => normalizeDim(d, t.ndim));
  if (new Set(norm).size !== norm.length) throw new ShapeError(`permute: repeated dim in [${dims.join(', ')}]`);
  return viewOf(t, { shape: norm.map((d) => t.shape[d]), strides: norm.map((d) => t.strides[d]), offset: t.offset });
}

export function transpose(t: Tensor, dim0: number, dim1: number): Tensor {
  if (t.ndim < 2 && dim0 === -2 && dim1 === -1) return reshape(t, t.shape);
  const a = normalizeDim(dim0, t.ndim);
  const b = normalizeDim(dim1, t.ndim);
  const order = t.shape.map((_, i) => (i === a ? b : i === b ? a : i));
  return permute(t, order);
}

function sliceImpl(t: Tensor, dim: number, start = 0, end = Number.MAX_SAFE_INTEGER, step = 1): Tensor {
  const d = normalizeDim(dim, t.ndim);
  if (!Number.isInteger(step) || step <= 0) throw new ShapeError(`slice: step must be a positive integer, got ${step}`);
  const size = t.shape[d];
  const clampIdx = (i: number) => Math.min(Math.max(i < 0 ? i + size : i, 0), size);
  const s = clampIdx(start);
  const e = Math.max(clampIdx(end), s);
  const len = Math.ceil((e - s) / step);
  const shape = [...t.shape];
  shape[d] = len;
  const strides = [...t.strides];
  strides[d] *= step;
  return viewOf(t, { shape, strides, offset: t.offset + (len > 0 ? s * t.strides[d] : 0) });
}

/** `length` elements of dim from start; out of range is an error (torch.narrow). */
export function narrow(t: Tensor, dim: number, start: number, length: number): Tensor {
  const d = normalizeDim(dim, t.ndim);
  const s = start < 0 ? start + t.shape[d] : start;
  if (!Number.isInteger(s) || !Number.isInteger(length) || s < 0 || length < 0 || s + length > t.shape[d]) {
    throw new ShapeError(`narrow: start ${start} length ${length} is out of range for dim ${d} of size ${t.shape[d]} (tensor ${t.describe()})`);
  }
  return slice(t, d, s, s + length);
}

function selectImpl(t: Tensor, dim: number, index: number): Tensor {
  const d = normalizeDim(dim, t.ndim);
  const i = index < 0 ? index + t.shape[d] : index;
  if (!Number.isInteger(i) || i < 0 || i >= t.shape[d]) {
    throw new ShapeError(`select: index ${index} is out of range for dim ${d} of size ${t.shape[d]} (tensor ${t.describe()})`);
  }
  return viewOf(t, {
    shape: t.shape.filter((_, k) => k !== d),
    strides: t.strides.filter((_, k) => k !== d),
    offset: t.offset + i * t.strides[d],
  });
}

function squeezeImpl(t: Tensor, dim?: number): Tensor {
  const keep = (k: number) => (dim === undefined ? t.shape[k] !== 1 : k !== normalizeDim(dim, t.ndim) || t.shape[k] !== 1);
  const idx = t.shape.map((_, k) => k).filter(keep);
  return viewOf(t, { shape: idx.map((k) => t.shape[k]), strides: idx.map((k) => t.strides[k]), offset: t.offset });
}

function unsqueezeImpl(t: Tensor, dim: number): Tensor {
  const d = normalizeDim(dim, t.ndim + 1);
  const shape = [...t.shape];
  const strides = [...t.strides];
  shape.splice(d, 0, 1);
  strides.splice(d, 0, d < t.ndim ? t.strides[d] * t.shape[d] : 1);
  return viewOf(t, { shape, strides, offset: t.offset });
}

function expandImpl(t: Tensor, shape: readonly number[]): Tensor {
  if (shape.length < t.ndim) throw new ShapeError(`expand: target ${formatShape(shape)} has fewer dims than ${t.describe()}`);
  const lead = shape.length - t.ndim;
  const strides: number[] = [];
  const out: number[] = [];
  shape.forEach((s, i) => {
    const own = i >= lead ? t.shape[i - lead] : 1;
    const size = s === -1 && i >= lead ? own : s;
    if (own !== size && own !== 1) throw new ShapeError(`expand: cannot expand ${t.describe()} to ${formatShape(shape)} (dim ${i}: ${own} vs ${s})`);
    out.push(size);
    strides.push(i < lead || own !== size ? 0 : t.strides[i - lead]);
  });
  checkShape(out, 'expand target');
  return viewOf(t, { shape: out, strides, offset: t.offset });
}

export function flatten(t: Tensor, startDim = 0, endDim = -1): Tensor {
  if (t.ndim === 0) return reshape(t, [1]);
  const s = normalizeDim(startDim, t.ndim);
  const e = normalizeDim(endDim, t.ndim);
  if (s > e) throw new ShapeError(`flatten: startDim ${startDim} comes after endDim ${endDim}`);
  return reshape(t, [...t.shape.slice(0, s), numel(t.shape.slice(s, e + 1)), ...t.shape.slice(e + 1)]);
}

function catImpl(tensors: readonly Tensor[], dim = 0): Tensor {
  if (tensors.length === 0) throw new ShapeError('cat: expected a non-empty list of tensors');
  const backend = commonBackend('cat', ...tensors);
  const first = tensors[0];
  const d = normalizeDim(dim, first.ndim);
  for (const t of tensors) {
    if (t.dtype !== first.dtype) throw new DTypeError(`cat: expected all tensors in ${first.dtype}, got ${t.describe()}`);
    if (t.ndim !== first.ndim || t.shape.some((s, i) => i !== d && s !== first.shape[i])) {
      throw new ShapeError(`cat: sizes must match except in dim ${d}, got ${tensors.map((x) => formatShape(x.shape)).join(' and ')}`);
    }
  }
  const shape = [...first.shape];
  shape[d] = tensors.reduce((n, t) => n + t.shape[d], 0);
  const out = zeros(shape, { dtype: first.dtype, device: first.device });
  const outStrides = contiguousStrides(shape);
  let at = 0;
  for (const t of tensors) {
    if (t.numel > 0) {
      const dst: View = { shape: t.shape, strides: outStrides, offset: at * outStrides[d] };
      backend.copyInto(t.operand(), { handle: out.storage.handle, dtype: out.dtype, view: dst });
    }
    at += t.shape[d];
  }
  return out;
}

/**
 * Writes src into the view dst in place (torch's dst.copy_(src)), converting to dst's dtype: how a KV cache
 * preallocated once takes each step's keys without reallocation. dst must be a view of existing storage.
 */
export function copyInto(dst: Tensor, src: Tensor): void {
  const backend = commonBackend('copyInto', dst, src);
  if (dst.shape.join() !== src.shape.join()) throw new ShapeError(`copyInto: src ${formatShape(src.shape)} does not match dst ${formatShape(dst.shape)}`);
  if (src.numel > 0) backend.copyInto(src.operand(), dst.operand());
  dst.storage.version++;
}

// ---- autograd: view ops pass the gradient back through the inverse view; slicing scatters it into zeros ----

/** A view of g (the sweep disposes the gradient it hands a rule). */
function passThrough(g: Tensor): Tensor {
  return viewOf(g, g.layout);
}

/** zeros shaped like x with g written into the part `part` of it selects (slice and select backward). */
function scatterInto(x: Tensor, g: Tensor, part: (z: Tensor) => Tensor): Tensor {
  const z = zeros(x.shape, { dtype: g.dtype, device: g.device });
  const region = part(z);
  copyInto(region, g);
  region.dispose();
  return z;
}

/** A contiguous copy with its own storage. */
export function clone(t: Tensor): Tensor {
  return differentiable(
    'clone',
    [t],
    () => cloneImpl(t),
    (g) => [passThrough(g)],
  );
}

/** A view when the layout allows it, else a copy (torch.reshape). */
export function reshape(t: Tensor, shape: readonly number[]): Tensor {
  return differentiable(
    'reshape',
    [t],
    () => reshapeImpl(t, shape),
    (g) => [g.reshape(t.shape)],
  );
}

/** Always a view; throws when the layout needs a copy (torch.view). */
export function view(t: Tensor, shape: readonly number[]): Tensor {
  return differentiable(
    'view',
    [t],
    () => viewImpl(t, shape),
    (g) => [g.reshape(t.shape)],
  );
}

export function permute(t: Tensor, dims: readonly number[]): Tensor {
  return differentiable(
    'permute',
    [t],
    () => permuteImpl(t, dims),
    (g) => {
      const norm = dims.map((d) => normalizeDim(d, t.ndim));
      const inverse = norm.map((_, i) => norm.indexOf(i));
      return [permuteImpl(g, inverse)];
    },
  );
}

/** Elements start..end-1 (step apart) of dim; negative indices count from the end, out-of-range ones clamp (Python slicing). */
export function slice(t: Tensor, dim: number, start = 0, end = Number.MAX_SAFE_INTEGER, step = 1): Tensor {
  return differentiable(
    'slice',
    [t],
    () => sliceImpl(t, dim, start, end, step),
    (g) => [scatterInto(t, g, (z) => sliceImpl(z, dim, start, end, step))],
  );
}

/** Index `index` of dim, removing the dim (t[..., index, ...]). */
export function select(t: Tensor, dim: number, index: number): Tensor {
  return differentiable(
    'select',
    [t],
    () => selectImpl(t, dim, index),
    (g) => [scatterInto(t, g, (z) => selectImpl(z, dim, index))],
  );
}

export function squeeze(t: Tensor, dim?: number): Tensor {
  return differentiable(
    'squeeze',
    [t],
    () => squeezeImpl(t, dim),
    (g) => [g.reshape(t.shape)],
  );
}

export function unsqueeze(t: Tensor, dim: number): Tensor {
  return differentiable(
    'unsqueeze',
    [t],
    () => unsqueezeImpl(t, dim),
    (g) => [g.reshape(t.shape)],
  );
}

/** Broadcast view: size-1 dims repeat with stride 0; -1 keeps a size (torch.expand). */
export function expand(t: Tensor, shape: readonly number[]): Tensor {
  return differentiable(
    'expand',
    [t],
    () => expandImpl(t, shape),
    (g) => [sumTo(g, t.shape)],
  );
}

/** Concatenates along dim (torch.cat): all inputs share dtype, device and every other size. */
export function cat(tensors: readonly Tensor[], dim = 0): Tensor {
  // Mixed dtypes promote (torch.cat uses result_type over its inputs): each is cast, then concatenated.
  const common = tensors.reduce<DType | undefined>((d, t) => (d === undefined || d === t.dtype ? t.dtype : promoteTypes(d, t.dtype)), undefined);
  if (common !== undefined && tensors.some((t) => t.dtype !== common)) {
    const same = tensors.map((t) => (t.dtype === common ? t : cast(t, common)));
    try {
      return cat(same, dim);
    } finally {
      same.forEach((t, i) => t !== tensors[i] && t.dispose());
    }
  }
  return differentiable(
    'cat',
    tensors,
    () => catImpl(tensors, dim),
    (g) => {
      const d = normalizeDim(dim, g.ndim);
      let at = 0;
      return tensors.map((t) => {
        const part = sliceImpl(g, d, at, at + t.shape[d]);
        at += t.shape[d];
        return part;
      });
    },
  );
}
