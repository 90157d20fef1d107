import { lanesPerWord, type DType } from '../../../core/dtype.js';
import { numel } from '../../../core/shape.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../gpu-context.js';
import { viaFloat32, type GpuOperand } from './elementwise.js';
import { commonWgsl, encodeFn, fillTemplate, grid1d, loadFn, wgslSource } from './wgsl.js';

/** Softmax or log-softmax along `dim` of a contiguous-view input; contiguous output of the same shape and dtype. */
export function softmaxKernel(ctx: GpuContext, x: GpuOperand, dim: number, log: boolean, outDtype: DType = x.dtype): GpuBuffer {
  const shape = x.view.shape;
  const d = shape[dim];
  const inner = numel(shape.slice(dim + 1));
  const rows = numel(shape) / Math.max(d, 1);
  const n = numel(shape);
  const lanes = lanesPerWord(outDtype);
  if (lanes > 1 && (inner !== 1 || d % lanes !== 0)) {
    // Rows would share packed output words between workgroups.
    return viaFloat32(ctx, shape, outDtype, false, () => softmaxKernel(ctx, x, dim, log, 'float32'));
  }
  const out = ctx.alloc(wordBytes(n, lanes));
  if (n === 0) return out;
  // Long rows want every invocation of a big workgroup; short rows waste fewer idle ones in a small one.
  const wg = d >= 2048 ? 256 : d >= 256 ? 128 : 64;
  const value = log ? 'v - row_max - log_sum' : 'exp_below_max(v - row_max) * inv';
  const nanRow = 'is_nan(row_sum)';
  const pipeline = ctx.pipeline(['softmax', log, x.dtype, outDtype, wg].join('|'), () => {
    const store =
      lanes === 1
        ? [
            '    let v = load0(base + j * p.inner);',
            `    out[first + j * p.inner] = encode_out(select(${value}, row_sum, ${nanRow}));`,
          ].join('\n')
        : [
            '    var word = 0u;',
            `    for (var l = 0u; l < ${lanes}u; l++) {`,
            '      let v = load0(base + j + l);',
            `      word |= encode_out(select(${value}, row_sum, ${nanRow})) << (l * ${32 / lanes}u);`,
            '    }',
            `    out[(first + j) / ${lanes}u] = word;`,
          ].join('\n');
    return commonWgsl() + fillTemplate(wgslSource(import.meta.url, 'softmax.wgsl'), {
      FUNCTIONS: loadFn('load0', 'in0', x.dtype, 'f32') + encodeFn('encode_out', outDtype, 'f32'),
      WG: wg,
      LANES: lanes,
      STORE: store,
    });
  });
  ctx.dispatch(pipeline, new Uint32Array([rows, d, inner, x.view.offset]).buffer, [out, x.buffer], grid1d(rows, 1));
  return out;
}
