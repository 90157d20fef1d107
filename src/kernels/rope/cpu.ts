// The float64 reference of rope: the oracle its WebGPU kernel is tested against.
import type { Operand } from '../../runtime/backend.js';
import type { StorageArray } from '../../core/codecs.js';
import { store, values } from '../../runtime/cpu/cpu-backend.js';

type Handle = StorageArray;

export function ropeReference(x: Operand<Handle>, cos: Operand<Handle>, sin: Operand<Handle>, positionOffset: number): Handle {
  const [s, h, d] = x.view.shape;
  // Partial rotary: the tables cover R = 2 half <= D dims; the rest pass through.
  const half = cos.view.shape[1];
  const xs = values(x);
  const c = values(cos);
  const sn = values(sin);
  const out = Float64Array.from(xs);
  for (let si = 0; si < s; si++) {
    const p = (positionOffset + si) * half;
    for (let hi = 0; hi < h; hi++) {
      const base = (si * h + hi) * d;
      for (let i = 0; i < half; i++) {
        const x1 = xs[base + i];
        const x2 = xs[base + i + half];
        out[base + i] = x1 * c[p + i] - x2 * sn[p + i];
        out[base + i + half] = x2 * c[p + i] + x1 * sn[p + i];
      }
    }
  }
  return store(out, x.dtype);
}
