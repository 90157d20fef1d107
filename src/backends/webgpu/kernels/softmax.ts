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
  const functions = (workgroup = true) =>
    wgslSource(import.meta.url, 'online-softmax.wgsl') +
    (workgroup ? wgslSource(import.meta.url, 'softmax-workgroup.wgsl') : '') +
    loadFn('load0', 'in0', x.dtype, 'f32') +
    encodeFn('encode_out', outDtype, 'f32');
  if (inner === 1 && d > SINGLE_PASS_MAX && rows < SPLIT_MAX_ROWS) {
    return splitRows(ctx, x, out, rows, d, log, outDtype, functions);
  }
  if (d <= ROW_PER_INVOCATION_MAX) {
    const pipeline = ctx.pipeline(['softmax-rows', log, x.dtype, outDtype].join('|'), () =>
      commonWgsl() +
      fillTemplate(wgslSource(import.meta.url, 'softmax-rows.wgsl'), { FUNCTIONS: functions(false), LANES: lanes, STORE: storeCode(lanes, log, true) }),
    );
    ctx.dispatch(pipeline, new Uint32Array([rows, d, inner, x.view.offset]).buffer, [out, x.buffer], grid1d(rows, 64));
    return out;
  }
  // Long rows want every invocation of a big workgroup; shorter rows waste fewer idle ones in a small one.
  const wg = d >= 2048 ? 256 : d >= 256 ? 128 : 64;
  const pipeline = ctx.pipeline(['softmax', log, x.dtype, outDtype, wg].join('|'), () =>
    commonWgsl() +
    fillTemplate(wgslSource(import.meta.url, 'softmax.wgsl'), { FUNCTIONS: functions(), WG: wg, LANES: lanes, STORE: storeCode(lanes, log, true) }),
  );
  ctx.dispatch(pipeline, new Uint32Array([rows, d, inner, x.view.offset]).buffer, [out, x.buffer], grid1d(rows, 1));
  return out;
}

/**
 * Rows up to this length take one dispatch (one workgroup per row, the 128256-entry vocabularies of LLM decode
 * included); longer rows, when there are few of them, are split across workgroups. Tune on real GPUs: a single
 * workgroup per row may already lose to the split path well below this.
 */
const SINGLE_PASS_MAX = 262144;
const SPLIT_MAX_ROWS = 16;
/** Rows up to this length are done by one invocation each. */
const ROW_PER_INVOCATION_MAX = 64;
/** Elements per workgroup of the split-row path. */
const SPLIT_CHUNK = 8192;

/**
 * Few long rows: `chunks` workgroups per row write partial (max, sum) states, then as many merge them and write
 * their piece (two dispatches instead of one, but the whole GPU works on the row).
 */
function splitRows(ctx: GpuContext, x: GpuOperand, out: GpuBuffer, rows: number, d: number, log: boolean, outDtype: DType, functions: () => string): GpuBuffer {
  const lanes = lanesPerWord(outDtype);
  const chunks = Math.min(256, Math.ceil(d / SPLIT_CHUNK));
  const chunkLen = Math.ceil(Math.ceil(d / chunks) / lanes) * lanes;
  const key = ['softmax-split', log, x.dtype, outDtype].join('|');
  const build = () =>
    commonWgsl() +
    fillTemplate(wgslSource(import.meta.url, 'softmax-split.wgsl'), { FUNCTIONS: functions(), LANES: lanes, STORE: storeCode(lanes, log, false) });
  const params = new Uint32Array([rows, d, chunks, chunkLen, x.view.offset, 0, 0, 0]).buffer;
  const partials = ctx.alloc(rows * chunks * 8);
  try {
    const grid = grid1d(rows * chunks, 1);
    // Both entry points share one layout: partials_main writes the partials through `out` and binds x in place of
    // the `partials` input it does not read (the same buffer cannot be bound writable and read-only at once).
    ctx.dispatch(ctx.pipeline(key, build, 'partials_main'), params, [partials, x.buffer, x.buffer], grid);
    ctx.dispatch(ctx.pipeline(key, build, 'normalize_main'), params, [out, x.buffer, partials], grid);
    return out;
  } finally {
    ctx.release(partials);
  }
}

/** The loop body writing output element(s) j of a row (strided: the row runs along a dim with inner > 1). */
function storeCode(lanes: number, log: boolean, strided: boolean): string {
  const value = log ? 'v - row_max - log_sum' : 'exp_below_max(v - row_max) * inv';
  // NaN rows (all -Inf or any NaN) have a NaN row_sum: every output is that NaN.
  const result = `select(${value}, row_sum, is_nan(row_sum))`;
  if (lanes === 1) {
    const step = strided ? ' * p.inner' : '';
    return [`    let v = load0(base + j${step});`, `    out[first + j${step}] = encode_out(${result});`].join('\n');
  }
  return [
    '    var word = 0u;',
    `    for (var l = 0u; l < ${lanes}u; l++) {`,
    '      let v = load0(base + j + l);',
    `      word |= encode_out(${result}) << (l * ${32 / lanes}u);`,
    '    }',
    `    out[(first + j) / ${lanes}u] = word;`,
  ].join('\n');
}
