import { ShapeError } from './errors.js';

export type Shape = readonly number[];

/** Where a tensor's elements sit in its storage, in elements (not bytes). */
export interface View {
  readonly shape: Shape;
  readonly strides: readonly number[];
  readonly offset: number;
}

export function numel(shape: Shape): number {
  let n = 1;
  for (let i = 0; i < shape.length; i++) n *= shape[i];
  return n;
}

export function contiguousStrides(shape: Shape): number[] {
  const strides = new Array<number>(shape.length);
  let s = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

export function contiguousView(shape: Shape): View {
  return { shape: Object.isFrozen(shape) ? shape : [...shape], strides: contiguousStrides(shape), offset: 0 };
}

/** True when the view reads its elements in row-major order with no gaps (size-1 dims may have any stride). */
export function isContiguous(view: View): boolean {
  let expected = 1;
  for (let i = view.shape.length - 1; i >= 0; i--) {
    if (view.shape[i] === 1) continue;
    if (view.strides[i] !== expected) return false;
    expected *= view.shape[i];
  }
  return true;
}

/** A 2-D view with its dims swapped (an [N, K] linear weight read as [K, N]), sharing the storage. */
export function transposed2d(view: View): View {
  return { shape: [view.shape[1], view.shape[0]], strides: [view.strides[1], view.strides[0]], offset: view.offset };
}

export function formatShape(shape: Shape): string {
  return `[${shape.join(', ')}]`;
}

export function checkShape(shape: Shape, what = 'shape'): void {
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 0) throw new ShapeError(`${what} ${formatShape(shape)} has an invalid size ${d}`);
  }
}

/** Normalizes a possibly negative dim (PyTorch style) and checks its range. */
export function normalizeDim(dim: number, rank: number, what = 'dim'): number {
  const r = Math.max(rank, 1);
  if (!Number.isInteger(dim) || dim < -r || dim >= r) {
    throw new ShapeError(`${what} ${dim} is out of range for a tensor of rank ${rank} (expected ${-r}..${r - 1})`);
  }
  return dim < 0 ? dim + r : dim;
}

export function broadcastShapes(a: Shape, b: Shape): number[] {
  const rank = Math.max(a.length, b.length);
  const out = new Array<number>(rank);
  for (let i = 0; i < rank; i++) {
    const da = a[a.length - rank + i] ?? 1;
    const db = b[b.length - rank + i] ?? 1;
    if (da !== db && da !== 1 && db !== 1) {
      throw new ShapeError(`shapes ${formatShape(a)} and ${formatShape(b)} cannot be broadcast (dim ${i}: ${da} vs ${db})`);
    }
    out[i] = da === 1 ? db : da;
  }
  return out;
}

/** The view of `view` read as `shape` by broadcasting: new leading dims and expanded size-1 dims get stride 0. */
export function broadcastView(view: View, shape: Shape): View {
  const lead = shape.length - view.shape.length;
  const strides = new Array<number>(shape.length);
  for (let i = 0; i < shape.length; i++) strides[i] = i < lead || view.shape[i - lead] !== shape[i] ? 0 : view.strides[i - lead];
  return { shape: Object.isFrozen(shape) ? shape : [...shape], strides, offset: view.offset };
}

/** Whether two shapes are the same (the common case of a binary op, which then needs no broadcast). */
export function sameShape(a: Shape, b: Shape): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Merges adjacent dims that are contiguous with each other in *every* view, so kernels index fewer dims.
 * All views must share one shape. Size-1 dims are dropped.
 */
export function coalesceViews(views: readonly View[]): View[] {
  // Plain loops and arrays of their final length (every elementwise dispatch runs this). Dim d joins the dim kept
  // before it (p) when, in every view, stride[p] = stride[d] * size[d]; the merged dim keeps d's stride.
  const shape = views[0].shape;
  const count = views.length;
  const n = numel(shape);
  if (n > 1) {
    // Row-major views (the usual elementwise op) merge into one dim of stride 1.
    let contiguous = true;
    for (let k = 0; contiguous && k < count; k++) contiguous = isContiguous(views[k]);
    if (contiguous) {
      const flat = [n];
      const out = new Array<View>(count);
      for (let k = 0; k < count; k++) out[k] = { shape: flat, strides: UNIT_STRIDES, offset: views[k].offset };
      return out;
    }
  }
  let rank = 0;
  let prev = -1;
  for (let d = 0; d < shape.length; d++) {
    if (shape[d] === 1) continue;
    if (prev < 0 || !mergeable(views, prev, d)) rank++;
    prev = d;
  }
  const outShape = new Array<number>(rank);
  const outStrides = new Array<number[]>(count);
  for (let k = 0; k < count; k++) outStrides[k] = new Array<number>(rank);
  let r = -1;
  prev = -1;
  for (let d = 0; d < shape.length; d++) {
    const size = shape[d];
    if (size === 1) continue;
    if (prev >= 0 && mergeable(views, prev, d)) outShape[r] *= size;
    else outShape[++r] = size;
    for (let k = 0; k < count; k++) outStrides[k][r] = views[k].strides[d];
    prev = d;
  }
  const out = new Array<View>(count);
  for (let k = 0; k < count; k++) out[k] = { shape: outShape, strides: outStrides[k], offset: views[k].offset };
  return out;
}

const UNIT_STRIDES: readonly number[] = Object.freeze([1]);

function mergeable(views: readonly View[], outer: number, inner: number): boolean {
  const size = views[0].shape[inner];
  for (let k = 0; k < views.length; k++) if (views[k].strides[outer] !== views[k].strides[inner] * size) return false;
  return true;
}

/** Resolves one -1 in a reshape target and checks the element count. */
export function inferReshape(from: Shape, to: readonly number[]): number[] {
  const n = numel(from);
  const free = to.filter((d) => d === -1).length;
  if (free > 1) throw new ShapeError(`reshape target ${formatShape(to)} has more than one -1`);
  const known = to.reduce((p, d) => (d === -1 ? p : p * d), 1);
  const out = to.map((d) => {
    if (d !== -1) return d;
    if (known === 0 || n % known !== 0) throw new ShapeError(`cannot reshape ${formatShape(from)} (${n} elements) to ${formatShape(to)}`);
    return n / known;
  });
  checkShape(out, 'reshape target');
  if (numel(out) !== n) throw new ShapeError(`cannot reshape ${formatShape(from)} (${n} elements) to ${formatShape(to)} (${numel(out)} elements)`);
  return out;
}

/**
 * Strides for viewing `view` as `shape` without copying, or undefined when the memory layout does not allow it
 * (then reshape copies). PyTorch's computeStride: walk chunks of old dims that are contiguous among themselves.
 */
export function viewStrides(view: View, shape: Shape): number[] | undefined {
  if (numel(view.shape) === 0 || isContiguous(view)) return contiguousStrides(shape);
  const oldShape = view.shape;
  const oldStrides = view.strides;
  const out = new Array<number>(shape.length);
  let viewD = shape.length - 1;
  let chunkBaseStride = oldStrides[oldStrides.length - 1];
  let tensorNumel = 1;
  let viewNumel = 1;
  for (let d = oldShape.length - 1; d >= 0; d--) {
    tensorNumel *= oldShape[d];
    const chunkEnds = d === 0 || (oldShape[d - 1] !== 1 && oldStrides[d - 1] !== tensorNumel * chunkBaseStride);
    if (!chunkEnds) continue;
    while (viewD >= 0 && (viewNumel < tensorNumel || shape[viewD] === 1)) {
      out[viewD] = viewNumel * chunkBaseStride;
      viewNumel *= shape[viewD];
      viewD--;
    }
    if (viewNumel !== tensorNumel) return undefined;
    if (d > 0) {
      chunkBaseStride = oldStrides[d - 1];
      tensorNumel = 1;
      viewNumel = 1;
    }
  }
  return viewD === -1 ? out : undefined;
}
