// Shape and stride arithmetic that every op and kernel relies on: broadcasting, contiguity, dim normalisation,
// reshape inference, view strides (PyTorch's computeStride) and the dim coalescing the GPU kernels index with.
import { describe, expect, it } from 'vitest';
import {
  broadcastShapes,
  broadcastView,
  checkShape,
  coalesceViews,
  contiguousStrides,
  contiguousView,
  inferReshape,
  isContiguous,
  normalizeDim,
  numel,
  viewStrides,
  type View,
} from '../../src/core/shape.js';
import { viewIndices } from '../../src/runtime/cpu/cpu-backend.js';
import { ShapeError } from '../../src/core/errors.js';

describe('numel, contiguous strides, contiguity', () => {
  it('numel and row-major strides', () => {
    expect(numel([])).toBe(1);
    expect(numel([2, 0, 3])).toBe(0);
    expect(numel([2, 3, 4])).toBe(24);
    expect(contiguousStrides([2, 3, 4])).toEqual([12, 4, 1]);
    expect(contiguousStrides([])).toEqual([]);
    expect(contiguousStrides([5, 0, 2])).toEqual([0, 2, 1]);
  });

  it('isContiguous ignores the strides of size-1 dims, and offsets', () => {
    expect(isContiguous({ shape: [2, 3], strides: [3, 1], offset: 5 })).toBe(true);
    expect(isContiguous({ shape: [2, 1, 3], strides: [3, 99, 1], offset: 0 })).toBe(true);
    expect(isContiguous({ shape: [3, 2], strides: [1, 3], offset: 0 })).toBe(false);
    expect(isContiguous({ shape: [2, 3], strides: [6, 2], offset: 0 })).toBe(false);
    expect(isContiguous({ shape: [4], strides: [0], offset: 0 })).toBe(false);
    expect(isContiguous({ shape: [], strides: [], offset: 3 })).toBe(true);
  });

  it('checkShape rejects negative, fractional and NaN sizes, naming the shape', () => {
    expect(() => checkShape([2, -1])).toThrow(/shape \[2, -1\] has an invalid size -1/);
    expect(() => checkShape([1.5])).toThrow(ShapeError);
    expect(() => checkShape([NaN])).toThrow(ShapeError);
    expect(() => checkShape([0, 3])).not.toThrow();
  });
});

describe('normalizeDim', () => {
  it('accepts -rank..rank-1, treats a 0-d tensor like rank 1', () => {
    expect(normalizeDim(-1, 3)).toBe(2);
    expect(normalizeDim(-3, 3)).toBe(0);
    expect(normalizeDim(2, 3)).toBe(2);
    expect(normalizeDim(0, 0)).toBe(0);
    expect(normalizeDim(-1, 0)).toBe(0);
    expect(() => normalizeDim(3, 3)).toThrow(/dim 3 is out of range for a tensor of rank 3 \(expected -3..2\)/);
    expect(() => normalizeDim(-4, 3)).toThrow(ShapeError);
    expect(() => normalizeDim(1, 0)).toThrow(ShapeError);
    expect(() => normalizeDim(0.5, 3)).toThrow(ShapeError);
  });
});

describe('broadcasting', () => {
  it('aligns trailing dims, size 1 stretches, mismatches name both shapes and the dim', () => {
    expect(broadcastShapes([3, 1], [1, 4])).toEqual([3, 4]);
    expect(broadcastShapes([257], [33, 1])).toEqual([33, 257]);
    expect(broadcastShapes([], [2, 3])).toEqual([2, 3]);
    expect(broadcastShapes([6, 1, 5], [7, 1, 1, 1])).toEqual([7, 6, 1, 5]);
    expect(broadcastShapes([3, 0], [3, 1])).toEqual([3, 0]);
    expect(broadcastShapes([1, 0], [4, 1])).toEqual([4, 0]);
    expect(() => broadcastShapes([2, 3], [4])).toThrow(/shapes \[2, 3\] and \[4\] cannot be broadcast \(dim 1: 3 vs 4\)/);
    expect(() => broadcastShapes([0], [2])).toThrow(ShapeError);
  });

  it('broadcastView gives new and stretched dims stride 0, keeps the offset', () => {
    const v: View = { shape: [3, 1], strides: [5, 1], offset: 7 };
    expect(broadcastView(v, [2, 3, 4])).toEqual({ shape: [2, 3, 4], strides: [0, 5, 0], offset: 7 });
    expect(Array.from(viewIndices(broadcastView(v, [2, 3, 2])))).toEqual([7, 7, 12, 12, 17, 17, 7, 7, 12, 12, 17, 17]);
  });
});

describe('reshape inference and view strides', () => {
  it('inferReshape resolves one -1 and checks the count', () => {
    expect(inferReshape([2, 3, 4], [-1, 4])).toEqual([6, 4]);
    expect(inferReshape([2, 3, 4], [4, -1, 3])).toEqual([4, 2, 3]);
    expect(inferReshape([0, 3], [-1])).toEqual([0]);
    expect(inferReshape([], [1, 1])).toEqual([1, 1]);
    expect(() => inferReshape([2, 3], [-1, -1])).toThrow(/more than one -1/);
    expect(() => inferReshape([2, 3], [4, -1])).toThrow(/cannot reshape \[2, 3\] \(6 elements\) to \[4, -1\]/);
    expect(() => inferReshape([2, 3], [7])).toThrow(/\(6 elements\) to \[7\] \(7 elements\)/);
    expect(() => inferReshape([0, 3], [-1, 0])).toThrow(ShapeError); // ambiguous, like torch
  });

  it('viewStrides: contiguous inputs always view; split/merge only within contiguous chunks', () => {
    const c = contiguousView([2, 3, 4]);
    expect(viewStrides(c, [6, 4])).toEqual([4, 1]);
    expect(viewStrides({ ...c, offset: 9 }, [24])).toEqual([1]);
    // transpose(1, 2): [2, 4, 3] strides [12, 1, 4]
    const t: View = { shape: [2, 4, 3], strides: [12, 1, 4], offset: 0 };
    expect(viewStrides(t, [2, 2, 2, 3])).toEqual([12, 2, 1, 4]);
    expect(viewStrides(t, [8, 3])).toBeUndefined();
    expect(viewStrides(t, [24])).toBeUndefined();
    expect(viewStrides(t, [2, 4, 3, 1])!.slice(0, 3)).toEqual([12, 1, 4]); // a size-1 dim's stride is free
    // A stepped slice: [5] stride 2 can be viewed as [5, 1] or [1, 5] but stays strided.
    const s: View = { shape: [5], strides: [2], offset: 1 };
    expect(viewStrides(s, [1, 5])).toEqual([10, 2]);
    // Expanded dims (stride 0) cannot merge with others.
    expect(viewStrides({ shape: [3, 4], strides: [0, 1], offset: 0 }, [12])).toBeUndefined();
    expect(viewStrides({ shape: [0, 4], strides: [1, 0], offset: 0 }, [2, 0])).toEqual([0, 1]);
  });

  it('a view found by viewStrides addresses the same elements as a row-major copy would', () => {
    const t: View = { shape: [2, 4, 3], strides: [12, 1, 4], offset: 3 };
    const target = [2, 2, 2, 3];
    const strides = viewStrides(t, target)!;
    expect(Array.from(viewIndices({ shape: target, strides, offset: 3 }))).toEqual(Array.from(viewIndices(t)));
  });
});

describe('coalesceViews', () => {
  it('merges dims contiguous in every view, drops size-1 dims, keeps offsets', () => {
    const out = contiguousView([2, 3, 4]);
    expect(coalesceViews([out, { shape: [2, 3, 4], strides: [12, 4, 1], offset: 5 }])).toEqual([
      { shape: [24], strides: [1], offset: 0 },
      { shape: [24], strides: [1], offset: 5 },
    ]);
    // Second view transposed in its last two dims: only the first dim stays separate... none merge.
    const tr = coalesceViews([contiguousView([2, 3, 4]), { shape: [2, 3, 4], strides: [12, 1, 3], offset: 0 }]);
    expect(tr[1].shape).toEqual([2, 3, 4]);
    // Broadcast dims merge with each other when both views agree.
    const bc = coalesceViews([contiguousView([5, 1, 6]), { shape: [5, 1, 6], strides: [0, 0, 0], offset: 2 }]);
    expect(bc).toEqual([
      { shape: [30], strides: [1], offset: 0 },
      { shape: [30], strides: [0], offset: 2 },
    ]);
    expect(coalesceViews([contiguousView([1, 1]), contiguousView([1, 1])])[0].shape).toEqual([]);
  });

  it('coalesced views address the same elements as the originals', () => {
    const views: View[] = [
      contiguousView([3, 4, 5, 2]),
      { shape: [3, 4, 5, 2], strides: [40, 10, 2, 1], offset: 7 },
      { shape: [3, 4, 5, 2], strides: [0, 5, 1, 0], offset: 1 },
    ];
    const merged = coalesceViews(views);
    for (let k = 0; k < views.length; k++) {
      expect(Array.from(viewIndices(merged[k]))).toEqual(Array.from(viewIndices(views[k])));
    }
  });
});
