// Launcher of softmax / log-softmax (softmax-rows.wgsl, softmax.wgsl, softmax-split.wgsl): one invocation per row
// for short rows, one workgroup per row otherwise, and for a few very long rows two dispatches over row pieces.
import { lanesPerWord, type DType } from '../../core/dtype.js';
import { numel } from '../../core/shape.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import { viaFloat32, type GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel, type VariantOf } from '../../runtime/webgpu/kernels/kernel.js';
import { grid1d, wgslSource, workgroupReduce } from '../../runtime/webgpu/kernels/wgsl.js';

/** What every softmax body depends on: log or not, the input and output dtypes. */
const VARIANT = { log: 'boolean', dtype: 'dtype', out: 'dtype' } as const;
type Variant = VariantOf<typeof VARIANT>;
const PARAMS = { rows: 'u32', d: 'u32', inner: 'u32', offset: 'u32' } as const;
const BINDINGS = { outputs: { out: { packed: 'out' } }, inputs: { x: { packed: 'dtype' } } } as const;
const lanesConstants = (v: Variant) => ({ LANES: lanesPerWord(v.out), BITS: 32 / lanesPerWord(v.out) });
/** reduce_state(t, m, s): the workgroup-wide merge of online-softmax states (needs online-softmax.wgsl's merge). */
export const softmaxWorkgroupWgsl = (): string =>
  wgslSource('softmax-workgroup.wgsl') + workgroupReduce({ name: 'reduce_states', type: 'vec2<f32>', combine: 'merge(a.x, a.y, b.x, b.y)', result: 'uniform' });
/** The online-softmax state helpers, and the workgroup-wide merge for kernels with a workgroup per row. */
const onlineSoftmax = (workgroup: boolean) => () => wgslSource('online-softmax.wgsl') + (workgroup ? softmaxWorkgroupWgsl() : '');

const softmaxRows = defineKernel({
  name: 'softmax-rows',
  source: 'softmax-rows.wgsl',
  variant: VARIANT,
  params: PARAMS,
  ...BINDINGS,
  grid: { threads: 'rows', invoke: 'softmax_row' },
  workgroupSize: 64,
  constants: lanesConstants,
  functions: onlineSoftmax(false),
  code: (v) => ({ STORE: storeCode(lanesPerWord(v.out), v.log, true) }),
});

const softmaxWorkgroup = defineKernel({
  name: 'softmax',
  source: 'softmax.wgsl',
  variant: { ...VARIANT, wg: 'number' },
  params: PARAMS,
  ...BINDINGS,
  grid: 'custom',
  workgroupSize: (v) => v.wg,
  constants: lanesConstants,
  functions: onlineSoftmax(true),
  code: (v) => ({ STORE: storeCode(lanesPerWord(v.out), v.log, true) }),
});

const softmaxSplit = defineKernel({
  name: 'softmax-split',
  source: 'softmax-split.wgsl',
  variant: VARIANT,
  params: { rows: 'u32', d: 'u32', chunks: 'u32', chunk_len: 'u32', offset: 'u32' },
  outputs: BINDINGS.outputs,
  inputs: { x: { packed: 'dtype' }, partials: 'f32' },
  grid: 'custom',
  workgroupSize: 256,
  constants: lanesConstants,
  functions: onlineSoftmax(true),
  code: (v) => ({ STORE: storeCode(lanesPerWord(v.out), v.log, false) }),
});

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
  const variant = { log, dtype: x.dtype, out: outDtype };
  if (inner === 1 && d > SINGLE_PASS_MAX && rows < SPLIT_MAX_ROWS) {
    return splitRows(ctx, x, out, rows, d, variant);
  }
  const params = { rows, d, inner, offset: x.view.offset };
  if (d <= ROW_PER_INVOCATION_MAX) {
    softmaxRows.run(ctx, variant, params, { out, x: x.buffer });
    return out;
  }
  // Long rows want every invocation of a big workgroup; shorter rows waste fewer idle ones in a small one.
  const wg = d >= 2048 ? 256 : d >= 256 ? 128 : 64;
  softmaxWorkgroup.run(ctx, { ...variant, wg }, params, { out, x: x.buffer }, { workgroups: grid1d(rows, 1) });
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
function splitRows(ctx: GpuContext, x: GpuOperand, out: GpuBuffer, rows: number, d: number, variant: Variant): GpuBuffer {
  const lanes = lanesPerWord(variant.out);
  const chunks = Math.min(256, Math.ceil(d / SPLIT_CHUNK));
  const chunkLen = Math.ceil(Math.ceil(d / chunks) / lanes) * lanes;
  const params = { rows, d, chunks, chunk_len: chunkLen, offset: x.view.offset };
  const partials = ctx.alloc(rows * chunks * 8);
  try {
    const workgroups = grid1d(rows * chunks, 1);
    // Both entry points share one layout: partials_main writes the partials through `out` and binds x in place of
    // the `partials` input it does not read (the same buffer cannot be bound writable and read-only at once).
    softmaxSplit.run(ctx, variant, params, { out: partials, x: x.buffer, partials: x.buffer }, { workgroups, entry: 'partials_main' });
    softmaxSplit.run(ctx, variant, params, { out, x: x.buffer, partials }, { workgroups, entry: 'normalize_main' });
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
    return [`    let v = load_x(base + j${step});`, `    out[first + j${step}] = encode_out(${result});`].join('\n');
  }
  return [
    '    var word = 0u;',
    '    for (var l = 0u; l < LANES; l++) {',
    '      let v = load_x(base + j + l);',
    `      word |= encode_out(${result}) << (l * BITS);`,
    '    }',
    '    out[(first + j) / LANES] = word;',
  ].join('\n');
}
