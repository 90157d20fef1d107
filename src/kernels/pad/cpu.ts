// The float64 reference of pad: the oracle its WebGPU kernel is tested against.
import { allocStorage, type StorageArray } from '../../core/codecs.js';
import { numel, type Shape } from '../../core/shape.js';
import type { Operand, PadMode } from '../../runtime/backend.js';
import { castCode } from '../../core/codecs.js';

type Handle = StorageArray;

/** F.pad over every dim (see Backend.pad): storage codes copied as they are, so every dtype and NaN payload survives. */
export function padReference(x: Operand<Handle>, before: readonly number[], outShape: Shape, mode: PadMode, value: number): Handle {
  const { shape, strides, offset } = x.view;
  const rank = shape.length;
  const total = numel(outShape);
  const out = allocStorage(x.dtype, total);
  // float32 moves as raw bits: a JS number would quiet a signaling NaN's payload.
  const asBits = (a: Handle) => (a instanceof Float32Array ? new Uint32Array(a.buffer, a.byteOffset, a.length) : a);
  const from = asBits(x.handle);
  const to = asBits(out);
  let fillCode = castCode(value, x.dtype);
  if (x.dtype === 'float32') fillCode = new Uint32Array(Float32Array.of(value).buffer)[0];
  const idx = new Array<number>(rank).fill(0);
  for (let e = 0; e < total; e++) {
    let off = offset;
    let inside = true;
    for (let d = 0; d < rank; d++) {
      let i = idx[d] - before[d];
      const size = shape[d];
      if (i < 0 || i >= size) {
        if (mode === 'constant') {
          inside = false;
          break;
        }
        i = mode === 'replicate' ? Math.min(Math.max(i, 0), size - 1) : i < 0 ? -i : 2 * (size - 1) - i;
      }
      off += i * strides[d];
    }
    to[e] = inside ? from[off] : fillCode;
    for (let d = rank - 1; d >= 0; d--) {
      if (++idx[d] < outShape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}
