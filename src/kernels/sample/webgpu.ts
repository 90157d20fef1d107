// Launcher of the sampler (sample.wgsl): one workgroup per logits row, one dispatch, from rows to token ids. One row
// takes its parameters from the uniform; a batch (one row per sequence of a batched decode step) from a words
// buffer with each row's parameters, so B sequences with B different settings cost one dispatch. A grammar's token
// bitmask (`mask`: ceil(V / 32) u32 words per row) rides in the same dispatch and adds no read back.
import { numel } from '../../core/shape.js';
import type { SamplingParams } from '../../runtime/backend.js';
import type { GpuBuffer, GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { workgroupReduce } from '../../runtime/webgpu/kernels/wgsl.js';

// The row's max and 64-bit masses over the workgroup; read uniformly, since the sampler branches on them around barriers.
const reductions = () =>
  workgroupReduce({ name: 'reduce_max', type: 'f32', combine: 'max(a, b)', result: 'uniform' }) +
  workgroupReduce({ name: 'reduce_sum64', type: 'vec2<u32>', combine: 'add64(a, b)', result: 'uniform' });

const sample = defineKernel({
  name: 'sample',
  source: 'sample.wgsl',
  // drawBuffer: a captured step reads its draw from a buffer the caller rewrites each step, not from the recorded uniform.
  // mask: a token bitmask per row (constrained decoding), read by allowed(i).
  variant: { dtype: 'dtype', drawBuffer: 'boolean', rows: 'boolean', mask: 'boolean' },
  params: {
    v: 'u32', // vocabulary size (row length)
    offset: 'u32', // row start in the logits buffer
    n_prev: 'u32', // previous tokens for penalties
    top_k: 'u32', // 0: off
    inv_temperature: 'f32', // 0: greedy
    top_p: 'f32', // 1: off
    min_p: 'f32', // 0: off
    u: 'f32', // uniform in [0, 1)
    inv_repetition: 'f32', // 1 / repetition penalty (1: off)
    repetition: 'f32',
    presence: 'f32',
    frequency: 'f32',
    u_at: 'u32', // element of draw_buf holding u (when the draw comes from a buffer); a batch's row r reads u_at + r
    mask_at: 'u32', // word of `mask` where row 0's bitmask starts
  },
  // work: the penalised, tempered logits (scratch).
  outputs: { token: 'i32', work: 'f32' },
  inputs: {
    logits: { packed: 'dtype' },
    prev: 'i32',
    draw_buf: { type: 'f32', when: (v) => v.drawBuffer },
    row_words: { type: 'u32', when: (v) => v.rows },
    mask: { type: 'u32', when: (v) => v.mask },
  },
  grid: 'custom',
  workgroupSize: 256,
  functions: (v) => (v.rows ? rowSamplingFn(v.drawBuffer) : '') + allowedFn(v.mask) + reductions(),
  code: (v) => ({
    SAMPLING: v.rows
      ? 'row_sampling(row)'
      : `Sampling(p.v, p.offset, p.n_prev, 0u, p.top_k, p.inv_temperature, p.top_p, p.min_p, ${v.drawBuffer ? 'draw_buf[p.u_at]' : 'p.u'}, p.inv_repetition, p.repetition, p.presence, p.frequency)`,
  }),
});

// wm (set by main) is this row's first word past mask_at.
const allowedFn = (mask: boolean) =>
  mask
    ? 'fn allowed(i: u32) -> bool {\n  return ((mask[p.mask_at + wm + (i >> 5u)] >> (i & 31u)) & 1u) != 0u;\n}\n'
    : 'fn allowed(i: u32) -> bool {\n  return true;\n}\n';

/** Words per row in `row_words`, in this order (f32 fields as their bits). */
const ROW_FIELDS = ['n_prev', 'prev_at', 'top_k', 'inv_temperature', 'top_p', 'min_p', 'u', 'inv_repetition', 'repetition', 'presence', 'frequency'] as const;

function rowSamplingFn(drawBuffer: boolean): string {
  const f = (name: (typeof ROW_FIELDS)[number]) => `row_words[a + ${ROW_FIELDS.indexOf(name)}u]`;
  const float = (name: (typeof ROW_FIELDS)[number]) => `bitcast<f32>(${f(name)})`;
  return `fn row_sampling(r: u32) -> Sampling {
  let a = r * ${ROW_FIELDS.length}u;
  return Sampling(p.v, p.offset + r * p.v, ${f('n_prev')}, ${f('prev_at')}, ${f('top_k')}, ${float('inv_temperature')}, ${float('top_p')}, ${float('min_p')}, ${drawBuffer ? 'draw_buf[p.u_at + r]' : float('u')}, ${float('inv_repetition')}, ${float('repetition')}, ${float('presence')}, ${float('frequency')});
}
`;
}

/** One row's words for `row_words`: its previous tokens are prev[prevAt, prevAt + prevCount). */
export function rowWords(rows: readonly { params: SamplingParams; prevAt: number; prevCount: number }[]): Uint32Array {
  const words = new Uint32Array(Math.max(1, rows.length * ROW_FIELDS.length));
  const floats = new Float32Array(words.buffer);
  rows.forEach(({ params: s, prevAt, prevCount }, r) => {
    const values: Record<(typeof ROW_FIELDS)[number], number> = {
      n_prev: prevCount,
      prev_at: prevAt,
      top_k: s.topK,
      inv_temperature: s.invTemperature,
      top_p: s.topP,
      min_p: s.minP,
      u: s.u,
      inv_repetition: s.invRepetition,
      repetition: s.repetition,
      presence: s.presence,
      frequency: s.frequency,
    };
    ROW_FIELDS.forEach((name, k) => {
      const at = r * ROW_FIELDS.length + k;
      if (name === 'n_prev' || name === 'prev_at' || name === 'top_k') words[at] = values[name];
      else floats[at] = values[name];
    });
  });
  return words;
}

/** Samples one token id from a contiguous logits row (previous tokens: contiguous int32 from element 0) into a new 1-element int32 buffer (-1: nothing samplable). */
export function sampleKernel(
  ctx: GpuContext,
  logits: GpuOperand,
  prev: GpuOperand | undefined,
  s: SamplingParams,
  drawFrom?: GpuOperand,
  mask?: GpuOperand,
): GpuBuffer {
  const v = numel(logits.view.shape);
  const out = ctx.alloc(4);
  const work = ctx.alloc(v * 4);
  // A binding cannot be absent: without previous tokens a 4-byte placeholder stands in (never read).
  const placeholder = prev ? undefined : ctx.alloc(4);
  try {
    sample.run(
      ctx,
      { dtype: logits.dtype, drawBuffer: drawFrom !== undefined, rows: false, mask: mask !== undefined },
      {
        v,
        offset: logits.view.offset,
        n_prev: prev ? numel(prev.view.shape) : 0,
        top_k: s.topK,
        inv_temperature: s.invTemperature,
        top_p: s.topP,
        min_p: s.minP,
        u: s.u,
        inv_repetition: s.invRepetition,
        repetition: s.repetition,
        presence: s.presence,
        frequency: s.frequency,
        u_at: drawFrom?.view.offset ?? 0,
        mask_at: mask?.view.offset ?? 0,
      },
      { token: out, work, logits: logits.buffer, prev: prev?.buffer ?? placeholder!, draw_buf: drawFrom?.buffer, mask: mask?.buffer },
      { workgroups: [1, 1, 1] },
    );
    return out;
  } finally {
    ctx.release(work);
    if (placeholder) ctx.release(placeholder);
  }
}

/**
 * Samples row r of a contiguous [B, V] logits operand into element r of a new int32 [B] buffer, one workgroup per
 * row. `words` (rowWords) holds each row's parameters and its span of `prev`; draws, when given, hold row r's
 * uniform at element offset + r; mask, when given, row r's bitmask at words offset + r * ceil(V / 32).
 */
export function sampleRowsKernel(
  ctx: GpuContext,
  logits: GpuOperand,
  rows: number,
  words: GpuBuffer,
  prev: GpuOperand | undefined,
  drawFrom?: GpuOperand,
  mask?: GpuOperand,
): GpuBuffer {
  const v = rows > 0 ? numel(logits.view.shape) / rows : 0;
  const out = ctx.alloc(Math.max(4, rows * 4));
  if (rows === 0) return out;
  const work = ctx.alloc(rows * v * 4);
  const placeholder = prev ? undefined : ctx.alloc(4);
  try {
    sample.run(
      ctx,
      { dtype: logits.dtype, drawBuffer: drawFrom !== undefined, rows: true, mask: mask !== undefined },
      {
        v,
        offset: logits.view.offset,
        n_prev: 0,
        top_k: 0,
        inv_temperature: 0,
        top_p: 1,
        min_p: 0,
        u: 0,
        inv_repetition: 1,
        repetition: 1,
        presence: 0,
        frequency: 0,
        u_at: drawFrom?.view.offset ?? 0,
        mask_at: mask?.view.offset ?? 0,
      },
      { token: out, work, logits: logits.buffer, prev: prev?.buffer ?? placeholder!, draw_buf: drawFrom?.buffer, row_words: words, mask: mask?.buffer },
      { workgroups: [rows, 1, 1] },
    );
    return out;
  } finally {
    ctx.release(work);
    if (placeholder) ctx.release(placeholder);
  }
}
