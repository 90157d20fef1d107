// The comparison helper must be able to fail: a perturbed result, a NaN for a number, a wrong-signed infinity or
// zero are all rejected, or every cross-backend test would pass vacuously.
import { describe, expect, it } from 'vitest';
import { setDefaultDevice, tensor } from '../../src/index.js';
import { BITS, checkBoth, expectClose, mismatches, randomTensor, randomValues, tolerance } from './compare.js';
import { setupWebGpu } from './webgpu.js';

const gpu = await setupWebGpu();
setDefaultDevice('cpu'); // tensors below are CPU unless a test says otherwise

describe('compare helper', () => {
  it('accepts values within atol + rtol * |want| and rejects a perturbed one', () => {
    const want = Float32Array.from(randomValues(100, 'float32'));
    const close = want.map((x) => x * (1 + 5e-6));
    expect(mismatches(close, want, tolerance('float32'))).toEqual([]);
    const perturbed = want.slice();
    perturbed[37] += 1e-3 * Math.abs(perturbed[37]) + 1e-4;
    const bad = mismatches(perturbed, want, tolerance('float32'));
    expect(bad.map((m) => m.index)).toEqual([37]);
    expect(() => expectClose(perturbed, want, tolerance('float32'), 'perturbed')).toThrow(/perturbed: 1 of 100 elements differ/);
  });

  it('matches NaN only with NaN and infinities only exactly', () => {
    const tol = tolerance('float16');
    expect(mismatches([NaN, Infinity, -Infinity], [NaN, Infinity, -Infinity], tol)).toEqual([]);
    expect(mismatches([0], [NaN], tol)).toHaveLength(1);
    expect(mismatches([NaN], [0], tol)).toHaveLength(1);
    expect(mismatches([-Infinity], [Infinity], tol)).toHaveLength(1);
    expect(mismatches([65504], [Infinity], tol)).toHaveLength(1);
    expect(mismatches([1, 2], [1], tol)).toHaveLength(1);
  });

  it('bit-exact mode tells -0 from +0 and compares NaN signs', () => {
    expect(mismatches([-0], [0], BITS)).toHaveLength(1);
    expect(mismatches([0], [0], BITS)).toEqual([]);
    expect(mismatches([NaN], [NaN], BITS)).toEqual([]);
    const negNaN = new Float32Array(new Uint32Array([0xffc00000]).buffer)[0];
    expect(mismatches([negNaN], [NaN], BITS)).toHaveLength(1);
    expect(mismatches([negNaN], [negNaN], BITS)).toEqual([]);
    expect(mismatches([1 + 2 ** -23], [1], BITS)).toHaveLength(1);
  });

  it('random inputs are fresh per call and deterministic per seed', () => {
    expect(randomValues(8, 'float32', 'normal', 5)).toEqual(randomValues(8, 'float32', 'normal', 5));
    expect(randomValues(8, 'float32')).not.toEqual(randomValues(8, 'float32'));
    expect(randomValues(1000, 'float32').every((x) => x !== 0)).toBe(true);
    expect(randomValues(1000, 'int32').every((x) => x !== 0 && x >= -60 && x <= 60)).toBe(true);
  });
});

describe.skipIf(!gpu.available)(`compare helper on WebGPU ${gpu.skipReason}`, () => {
  it('checkBoth passes for the same op and fails when the GPU side differs', async () => {
    const x = randomTensor([257]);
    await checkBoth([x], (t) => t.mul(2), tolerance('float32'));
    await expect(checkBoth([x], (t) => (t.device === 'webgpu' ? t.mul(2.0001) : t.mul(2)), tolerance('float32'))).rejects.toThrow(/elements differ/);
    await expect(checkBoth([x], (t) => (t.device === 'webgpu' ? t.reshape(257, 1) : t.clone()), tolerance('float32'))).rejects.toThrow();
    x.dispose();
  });

  it('checkBoth notices a single wrong element of a packed f16 result', async () => {
    const x = tensor(randomValues(9, 'float32'), { dtype: 'float16' });
    const shift = tensor([0, 0, 0, 0, 0, 0, 0, 0, 0.5], { dtype: 'float16' });
    const gshift = await shift.to('webgpu');
    // The GPU side alone adds 0.5 to the last element (the odd lane of a half-filled word).
    await expect(checkBoth([x], (t) => (t.device === 'webgpu' ? t.add(gshift) : t.add(0)), tolerance('float16'))).rejects.toThrow(/\[8\]/);
    x.dispose();
    shift.dispose();
    gshift.dispose();
  });
});
