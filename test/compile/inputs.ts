// Inputs of the compile() tests: values from a seeded xorshift, so every call of a test gets fresh, reproducible data.
import * as tg from '../../src/index.js';
import type { Tensor } from '../../src/index.js';

export function randomValues(n: number, seed: number, scale = 2): number[] {
  let s = seed >>> 0 || 1;
  return Array.from({ length: n }, () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return ((s >>> 0) / 2 ** 32 - 0.5) * scale;
  });
}

/** A tensor of shape on device with randomValues(seed). */
export function randomInput(device: 'cpu' | 'webgpu', shape: readonly number[], seed: number, dtype: tg.DType = 'float32'): Tensor {
  return tg.tensor(
    randomValues(
      shape.reduce((a, b) => a * b, 1),
      seed,
    ),
    { shape: [...shape], device, dtype },
  );
}
