// FP8 quantization with on-device amax: the inverse of scaledMm's dequantization scales.
import { type DType } from '../core/dtype.js';
import { DTypeError, ShapeError } from '../core/errors.js';
import { formatShape } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { cast } from './convert.js';
import { zeros } from './creation.js';
import { abs, div, maximum } from './elementwise.js';
import { max } from './reduce.js';
import { cat, narrow, reshape } from './shape-ops.js';

export type QuantGranularity = 'tensor' | 'row' | 'block128' | 'group128';

export interface QuantizeOptions {
  dtype?: 'float8_e4m3fn' | 'float8_e5m2';
  /**
   * tensor: one scale; row: one per row ([M, 1]); block128: one per 128x128 block of a [N, K] weight
   * ([ceil(N/128), ceil(K/128)], the HF `weight_scale_inv` layout); group128: one per 1x128 group of activations
   * ([M, ceil(K/128)]).
   */
  granularity?: QuantGranularity;
}

export interface Quantized {
  /** The FP8 values: round(x / scale), saturated to the format's largest finite value. */
  data: Tensor;
  /** float32 dequantization scale (x ~= data * scale), shaped for scaledMm. */
  scale: Tensor;
}

const FP8_MAX: Record<string, number> = { float8_e4m3fn: 448, float8_e5m2: 57344 };
/** An all-zero block gets this amax, so its scale stays finite (the usual recipe's clamp). */
const MIN_AMAX = 1e-12;

/** Runs fn with a list that collects intermediates; they are disposed afterwards. */
function withTemps<T>(fn: (keep: (t: Tensor) => Tensor) => T): T {
  const temps: Tensor[] = [];
  try {
    return fn((t) => {
      temps.push(t);
      return t;
    });
  } finally {
    for (const t of temps) t.dispose();
  }
}

/** Zero-pads dim `dim` of x up to a multiple of 128 (zeros leave amax unchanged). */
function padTo128(x: Tensor, dim: number, keep: (t: Tensor) => Tensor): Tensor {
  const size = x.shape[dim];
  const pad = (128 - (size % 128)) % 128;
  if (pad === 0) return x;
  const shape = [...x.shape];
  shape[dim] = pad;
  return keep(cat([x, keep(zeros(shape, { dtype: x.dtype, device: x.device }))], dim));
}

export function quantize(x: Tensor, options: QuantizeOptions = {}): Quantized {
  const dtype: DType = options.dtype ?? 'float8_e4m3fn';
  const granularity = options.granularity ?? 'tensor';
  if (!(dtype in FP8_MAX)) throw new DTypeError(`quantize: dtype must be float8_e4m3fn or float8_e5m2, got ${dtype}`);
  if (!['float32', 'float16', 'bfloat16'].includes(x.dtype)) throw new DTypeError(`quantize: input must be float32, float16 or bfloat16, got ${x.describe()}`);
  if (granularity !== 'tensor' && x.ndim !== 2) throw new ShapeError(`quantize: ${granularity} granularity needs a 2-D tensor, got ${formatShape(x.shape)}`);
  const fmax = FP8_MAX[dtype];
  return withTemps((keep) => {
    const xf = x.dtype === 'float32' ? x : keep(cast(x, 'float32'));
    const ax = keep(abs(xf));
    /** amax -> dequantization scale. */
    const scaleOf = (amax: Tensor) => div(keep(maximum(amax, MIN_AMAX)), fmax);
    const toFp8 = (scaled: Tensor) => cast(scaled, dtype, { saturate: true });
    if (granularity === 'tensor' || granularity === 'row') {
      const amax = keep(granularity === 'tensor' ? max(ax) : max(ax, 1, { keepdim: true }));
      const scale = scaleOf(amax);
      return { data: toFp8(keep(div(xf, scale))), scale };
    }
    const [rows, cols] = x.shape;
    const kb = Math.ceil(cols / 128);
    const paddedCols = kb * 128;
    if (granularity === 'group128') {
      const grouped = keep(reshape(padTo128(ax, 1, keep), [rows, kb, 128]));
      const scale = scaleOf(keep(max(grouped, 2)));
      const xs = keep(reshape(padTo128(xf, 1, keep), [rows, kb, 128]));
      const q = keep(reshape(keep(div(xs, keep(reshape(scale, [rows, kb, 1])))), [rows, paddedCols]));
      return { data: toFp8(keep(narrow(q, 1, 0, cols))), scale };
    }
    const nb = Math.ceil(rows / 128);
    const blocks = keep(reshape(padTo128(padTo128(ax, 1, keep), 0, keep), [nb, 128, kb, 128]));
    const scale = scaleOf(keep(max(keep(max(blocks, 3)), 1)));
    const xs = keep(reshape(padTo128(padTo128(xf, 1, keep), 0, keep), [nb, 128, kb, 128]));
    const q = keep(reshape(keep(div(xs, keep(reshape(scale, [nb, 1, kb, 1])))), [nb * 128, paddedCols]));
    return { data: toFp8(keep(narrow(keep(narrow(q, 0, 0, rows)), 1, 0, cols))), scale };
  });
}
