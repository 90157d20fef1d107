// FP8 quantization with on-device amax: the inverse of scaledMm's dequantization scales.
import { runKernel } from '../kernels/registry.js';
import type { DType } from '../core/dtype.js';
import { DTypeError, ShapeError } from '../core/errors.js';
import { formatShape } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { cast } from './convert.js';
import { abs, div, maximum } from './elementwise.js';
import { max } from './reduce.js';
import { tidy } from '../core/scope.js';
import { commonBackend, wrap } from './util.js';

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

/** Row, group and block scales: one fused backend kernel (amax per block, then the scaled cast). */
function blockwise(x: Tensor, dtype: 'float8_e4m3fn' | 'float8_e5m2', fmax: number, [blockRows, blockCols]: [number, number]): Quantized {
  const backend = commonBackend('quantize', x);
  const [rows, cols] = x.shape;
  const [data, scale] = runKernel('quantizeBlocks', backend, { x: x.operand(), blocks: { dtype, blockRows, blockCols, fmax } });
  const scaleShape = blockRows === 1 && blockCols === cols ? [rows, 1] : [Math.ceil(rows / blockRows), Math.ceil(cols / blockCols)];
  return { data: wrap(backend, data, dtype, x.shape), scale: wrap(backend, scale, 'float32', scaleShape) };
}

export function quantize(x: Tensor, options: QuantizeOptions = {}): Quantized {
  const dtype: DType = options.dtype ?? 'float8_e4m3fn';
  const granularity = options.granularity ?? 'tensor';
  if (!(dtype in FP8_MAX)) throw new DTypeError(`quantize: dtype must be float8_e4m3fn or float8_e5m2, got ${dtype}`);
  if (!['float32', 'float16', 'bfloat16'].includes(x.dtype)) throw new DTypeError(`quantize: input must be float32, float16 or bfloat16, got ${x.describe()}`);
  if (granularity !== 'tensor' && x.ndim !== 2) throw new ShapeError(`quantize: ${granularity} granularity needs a 2-D tensor, got ${formatShape(x.shape)}`);
  const fmax = FP8_MAX[dtype];
  const fp8 = dtype as 'float8_e4m3fn' | 'float8_e5m2';
  if (granularity === 'group128' || granularity === 'block128' || (granularity === 'row' && x.shape[1] > 0)) {
    return blockwise(x, fp8, fmax, granularity === 'row' ? [1, x.shape[1]] : granularity === 'group128' ? [1, 128] : [128, 128]);
  }
  return tidy(() => {
    const xf = x.dtype === 'float32' ? x : cast(x, 'float32');
    const ax = abs(xf);
    /** amax -> dequantization scale. */
    const scaleOf = (amax: Tensor) => div(maximum(amax, MIN_AMAX), fmax);
    const toFp8 = (scaled: Tensor) => cast(scaled, dtype, { saturate: true });
    // Tensor scales (one reduction over everything), and rows of length 0.
    const scale = scaleOf(granularity === 'tensor' ? max(ax) : max(ax, 1, { keepdim: true }));
    return { data: toFp8(div(xf, scale)), scale };
  });
}
