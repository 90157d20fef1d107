// The float64 reference of resample: the oracle its WebGPU kernel is tested against.
import type { StorageArray } from '../../core/codecs.js';
import type { Operand } from '../../runtime/backend.js';
import { store, values } from '../../runtime/cpu/cpu-backend.js';

type Handle = StorageArray;

export function resampleReference(x: Operand<Handle>, kernel: Operand<Handle>, stride: number, padLeft: number, length: number): Handle {
  const [batch, t] = x.view.shape;
  const [phases, width] = kernel.view.shape;
  const xs = values(x);
  const ks = values(kernel);
  const out = new Float64Array(batch * length);
  for (let b = 0; b < batch; b++) {
    for (let i = 0; i < length; i++) {
      const phase = i % phases;
      const start = Math.floor(i / phases) * stride - padLeft;
      let s = 0;
      for (let w = 0; w < width; w++) {
        const p = start + w;
        if (p >= 0 && p < t) s += ks[phase * width + w] * xs[b * t + p];
      }
      out[b * length + i] = s;
    }
  }
  return store(out, 'float32');
}
