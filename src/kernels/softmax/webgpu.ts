// Launcher of softmax / log-softmax: one invocation per row for rows up to 64 (softmax-rows.wgsl); contiguous longer
// rows four elements at a time, one workgroup per row or, when there are too few rows to fill the adapter, pieces of
// each row on several workgroups in two dispatches (softmax-long.wgsl); rows along a dim with inner > 1 one
// workgroup per row (softmax.wgsl).
import { lanesPerWord, type DType } from '../../core/dtype.js';
import { numel } from '../../core/shape.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import { viaFloat32, type GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { bytesOf, defineKernel, type VariantOf } from '../../runtime/webgpu/kernels/kernel.js';
import { decodeExpr, grid1d, wgslSource, workgroupReduce } from '../../runtime/webgpu/kernels/wgsl.js';

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
  code: (v) => ({ STORE: storeCode(lanesPerWord(v.out), v.log) }),
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
  code: (v) => ({ STORE: storeCode(lanesPerWord(v.out), v.log) }),
});

/**
 * Contiguous rows longer than 64 (softmax-long.wgsl): quads of 4 elements, with vec4 bindings where `vec` holds
 * (see vecBindable); one workgroup per row, or `split`: pieces of a row on several workgroups in two dispatches.
 */
const softmaxLong = defineKernel({
  name: 'softmax-long',
  source: 'softmax-long.wgsl',
  variant: { ...VARIANT, vec: 'boolean', wg: 'number' },
  params: { rows: 'u32', d: 'u32', chunks: 'u32', chunk_len: 'u32', offset: 'u32' },
  outputs: { out: { packed: 'out', type: (v) => (v.vec ? 'vec4<u32>' : 'u32') } },
  inputs: { x: { packed: 'dtype', type: (v) => (v.vec ? 'vec4<u32>' : 'u32') }, partials: 'f32' },
  grid: 'custom',
  workgroupSize: (v) => v.wg,
  constants: (v) => ({ ...lanesConstants(v), PSTRIDE: 2 }),
  functions: (v) => onlineSoftmax(true)() + longRowHelpers(v),
});

/** load4 / store4 / store_word / out_value(4) of softmax-long.wgsl for one variant. */
function longRowHelpers(v: Variant & { vec: boolean }): string {
  const inLanes = lanesPerWord(v.dtype);
  const outLanes = lanesPerWord(v.out);
  const dec = (code: string) => decodeExpr(v.dtype, code, 'f32');
  let load4: string;
  if (!v.vec) load4 = '  return vec4<f32>(load_x(e), load_x(e + 1u), load_x(e + 2u), load_x(e + 3u));';
  else if (inLanes === 1) load4 = '  return bitcast<vec4<f32>>(x[e >> 2u]);';
  else {
    // Two 16-bit lanes a word: the quad is half of a vec4 of words.
    load4 = [
      '  let w = x[e >> 3u];',
      '  let hi = (e & 4u) != 0u;',
      '  let a = select(w.x, w.z, hi);',
      '  let b = select(w.y, w.w, hi);',
      `  return vec4<f32>(${dec('a & 0xffffu')}, ${dec('a >> 16u')}, ${dec('b & 0xffffu')}, ${dec('b >> 16u')});`,
    ].join('\n');
  }
  let store4: string;
  if (outLanes === 1) {
    const words = ['r.x', 'r.y', 'r.z', 'r.w'].map((c) => `encode_out(${c})`);
    store4 = v.vec ? `  out[o >> 2u] = vec4<u32>(${words.join(', ')});` : words.map((w, i) => `  out[o + ${i}u] = ${w};`).join('\n');
  } else {
    // o is a multiple of 4: two whole words.
    const w0 = 'encode_out(r.x) | (encode_out(r.y) << 16u)';
    const w1 = 'encode_out(r.z) | (encode_out(r.w) << 16u)';
    store4 = [`  store_word(o >> 1u, ${w0});`, `  store_word((o >> 1u) + 1u, ${w1});`].join('\n');
  }
  const value = (t: string) => (v.log ? `v - row_max - log_sum` : `exp_below_max${t}(v - row_max) * inv`);
  return [
    `fn store_word(i: u32, word: u32) {\n  ${v.vec ? 'out[i >> 2u][i & 3u]' : 'out[i]'} = word;\n}`,
    `fn load4(e: u32) -> vec4<f32> {\n${load4}\n}`,
    `fn store4(o: u32, r: vec4<f32>) {\n${store4}\n}`,
    `fn out_value4(v: vec4<f32>, row_max: f32, inv: f32, log_sum: f32) -> vec4<f32> {\n  return ${value('4')};\n}`,
    `fn out_value(v: f32, row_max: f32, inv: f32, log_sum: f32) -> f32 {\n  return ${value('')};\n}`,
    '',
  ].join('\n');
}

/** Paths the launcher may take; tests force the split and scalar-quad paths on small inputs with these. */
export const softmaxTuning = {
  /** Bind vec4s where the row layout allows (false: four scalar loads a quad, the path of unaligned rows). */
  vec4: true,
  /** Overrides the adapter's policy (undefined: from the device's adapterInfo). */
  policy: undefined as SoftmaxPolicyName | undefined,
  /** Overrides the policy's piece length of split rows (elements; rounded up to a multiple of 4). */
  chunkLen: undefined as number | undefined,
};

/**
 * How rows are cut up on one kind of adapter. The numbers were chosen on SwiftShader (docs/benchmarks.md, issue 35)
 * for software adapters, and from first principles for GPUs (no GPU was lent to measure on).
 */
export interface SoftmaxPolicy {
  /** Rows up to this length take one invocation each (softmax-rows.wgsl)... */
  readonly rowPerInvocationMax: number;
  /** ...when there are at least this many rows (else the lanes of a workgroup would idle). */
  readonly rowPerInvocationMinRows: number;
  /** Workgroup size of long rows (d > rowPerInvocationMax) by their length in quads. */
  workgroupSize(quads: number): number;
  /** A batch of fewer rows than this splits each row over several workgroups (two dispatches)... */
  readonly targetWorkgroups: number;
  /** ...into pieces of at least this many elements. */
  readonly minChunk: number;
}
export type SoftmaxPolicyName = 'gpu' | 'software';

export const SOFTMAX_POLICIES: Readonly<Record<SoftmaxPolicyName, SoftmaxPolicy>> = {
  // A GPU wants many workgroups in flight: rows of a small batch are split over 256 workgroups in all, in pieces of
  // 8192 or more (a shorter piece finishes sooner than the second dispatch costs); a long row gets 256 invocations.
  // Short rows take one invocation each only up to 64: longer ones would be read by one lane, uncoalesced.
  gpu: {
    rowPerInvocationMax: 64,
    rowPerInvocationMinRows: 1,
    workgroupSize: (q) => (q >= 1024 ? 256 : q >= 128 ? 128 : 64),
    targetWorkgroups: 256,
    minChunk: 8192,
  },
  // SwiftShader runs a workgroup on one CPU thread, SIMD 4 lanes wide, and switches between every group of 4
  // invocations at each barrier: a 64-invocation workgroup with a reduction over 100 elements cost ~50x the same
  // rows done one invocation each, and 16 invocations beat 256 on rows of 4097 by 5-10x. So: one invocation per row
  // up to 1024 elements when there are rows for a few workgroups; 16 invocations, or 32 from 4096 elements (32 vs 64
  // vs 256: 140 / 188 / 200 ms on [32,128256], level on [1,128256]); no split (a second dispatch and a second pass
  // over rows no longer in cache lost to one workgroup per row: 2.3-3x slower on [1,128256] and [32,128256]).
  software: { rowPerInvocationMax: 1024, rowPerInvocationMinRows: 64, workgroupSize: (q) => (q >= 1024 ? 32 : 16), targetWorkgroups: 0, minChunk: Infinity },
};

/** The adapter's policy: 'software' for fallback adapters and CPU rasterisers, else 'gpu'. */
export function softmaxPolicyName(device: GPUDevice): SoftmaxPolicyName {
  if (softmaxTuning.policy) return softmaxTuning.policy;
  const info = (device as GPUDevice & { adapterInfo?: GPUAdapterInfo & { isFallbackAdapter?: boolean } }).adapterInfo;
  if (!info) return 'gpu';
  return info.isFallbackAdapter === true || SOFTWARE_ADAPTER.test(`${info.vendor} ${info.architecture} ${info.description} ${info.device}`)
    ? 'software'
    : 'gpu';
}
const SOFTWARE_ADAPTER = /swiftshader|llvmpipe|lavapipe|softpipe|microsoft basic render/i;

/** What the launcher does with `rows` rows of length d (inner 1) under a policy. */
export type SoftmaxPlan = { kind: 'row-per-invocation' } | { kind: 'long'; wg: number; chunks: number; chunkLen: number };

export function softmaxPlan(policy: SoftmaxPolicy, rows: number, d: number, chunkLen?: number): SoftmaxPlan {
  if (d <= ROW_PER_INVOCATION_MAX || (d <= policy.rowPerInvocationMax && rows >= policy.rowPerInvocationMinRows)) return { kind: 'row-per-invocation' };
  let chunks = 1;
  if (chunkLen !== undefined) chunks = Math.ceil(d / (Math.ceil(chunkLen / 4) * 4));
  else if (rows < policy.targetWorkgroups) chunks = Math.min(Math.ceil(policy.targetWorkgroups / rows), Math.floor(d / policy.minChunk));
  // One reduce merges a row's pieces, so at most WG (256) of them.
  chunks = Math.max(1, Math.min(chunks, 256));
  const len = Math.ceil(d / chunks / 4) * 4;
  chunks = Math.ceil(d / len);
  return { kind: 'long', wg: chunks > 1 ? 256 : policy.workgroupSize(Math.ceil(d / 4)), chunks, chunkLen: len };
}

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
  const params = { rows, d, inner, offset: x.view.offset };
  if (inner === 1) {
    const plan = softmaxPlan(SOFTMAX_POLICIES[softmaxPolicyName(ctx.gpuDevice)], rows, d, softmaxTuning.chunkLen);
    if (plan.kind === 'long') return longRows(ctx, x, out, rows, d, variant, plan);
  }
  if (d <= ROW_PER_INVOCATION_MAX || inner === 1) {
    softmaxRows.run(ctx, variant, params, { out, x: x.buffer });
    return out;
  }
  // Rows along a dim with inner > 1: long rows want every invocation of a big workgroup; shorter rows waste fewer
  // idle ones in a small one.
  const wg = d >= 2048 ? 256 : d >= 256 ? 128 : 64;
  softmaxWorkgroup.run(ctx, { ...variant, wg }, params, { out, x: x.buffer }, { workgroups: grid1d(rows, 1) });
  return out;
}

/** Rows up to this length are done by one invocation each on every adapter. */
const ROW_PER_INVOCATION_MAX = 64;

/** Whether a buffer bound as array<vec4<u32>> holds every vec4 its first `words` words touch. */
const holdsVec4s = (b: GpuBuffer, words: number) => b.size >= Math.ceil(words / 4) * 16;

/**
 * Contiguous rows longer than 64: whole quads (4 elements) per load where every row starts on a vec4 of input and
 * output words (offset and d multiples of 4), one workgroup per row, or pieces of a row on several workgroups when
 * there are too few rows to fill the adapter.
 */
function longRows(ctx: GpuContext, x: GpuOperand, out: GpuBuffer, rows: number, d: number, variant: Variant, plan: SoftmaxPlan & { kind: 'long' }): GpuBuffer {
  const inLanes = lanesPerWord(variant.dtype);
  const n = rows * d;
  const vec =
    softmaxTuning.vec4 &&
    d % 4 === 0 &&
    x.view.offset % 4 === 0 &&
    holdsVec4s(x.buffer, Math.ceil((x.view.offset + n) / inLanes)) &&
    holdsVec4s(out, Math.ceil(n / lanesPerWord(variant.out)));
  const { wg, chunks, chunkLen } = plan;
  const v = { ...variant, vec, wg };
  const params = { rows, d, chunks, chunk_len: chunkLen, offset: x.view.offset };
  const bytes = bytesOf(variant.dtype, 2 * n) + bytesOf(variant.out, n);
  if (chunks === 1) {
    // `partials` is not read by this entry point: x stands in for it.
    softmaxLong.run(ctx, v, params, { out, x: x.buffer, partials: x.buffer }, { workgroups: grid1d(rows, 1), bytes });
    return out;
  }
  const partials = ctx.alloc(rows * chunks * 8);
  try {
    const workgroups = grid1d(rows * chunks, 1);
    // partials_main writes the states through `out` and binds x in place of the `partials` it does not read (one
    // buffer cannot be bound writable and read-only at once).
    softmaxLong.run(
      ctx,
      v,
      params,
      { out: partials, x: x.buffer, partials: x.buffer },
      { workgroups, entry: 'partials_main', bytes: bytesOf(variant.dtype, n) },
    );
    softmaxLong.run(
      ctx,
      v,
      params,
      { out, x: x.buffer, partials },
      { workgroups, entry: 'normalize_main', bytes: bytesOf(variant.dtype, n) + bytesOf(variant.out, n) },
    );
    return out;
  } finally {
    ctx.release(partials);
  }
}

/** The loop body writing output element(s) j of a row (element j of the row is j * p.inner past its first). */
function storeCode(lanes: number, log: boolean): string {
  const value = log ? 'v - row_max - log_sum' : 'exp_below_max(v - row_max) * inv';
  // NaN rows (all -Inf or any NaN) have a NaN row_sum: every output is that NaN.
  const result = `select(${value}, row_sum, is_nan(row_sum))`;
  if (lanes === 1) {
    return [`    let v = load_x(base + j * p.inner);`, `    out[first + j * p.inner] = encode_out(${result});`].join('\n');
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
