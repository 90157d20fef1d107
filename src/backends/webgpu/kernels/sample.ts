// Launcher of the sampler (sample.wgsl): one workgroup, one dispatch, from a logits row to a token id.
import { numel } from '../../../core/shape.js';
import type { SamplingParams } from '../../backend.js';
import type { GpuBuffer, GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';
import { defineKernel } from './kernel.js';

const sample = defineKernel({
  name: 'sample',
  source: 'sample.wgsl',
  // drawBuffer: a captured step reads its draw from a buffer the caller rewrites each step, not from the recorded uniform.
  variant: { dtype: 'dtype', drawBuffer: 'boolean' },
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
    u_at: 'u32', // element of draw_buf holding u (when the draw comes from a buffer)
  },
  // work: the penalised, tempered logits (scratch).
  outputs: { token: 'i32', work: 'f32' },
  inputs: { logits: { packed: 'dtype' }, prev: 'i32', draw_buf: { type: 'f32', when: (v) => v.drawBuffer } },
  grid: 'custom',
  workgroupSize: 256,
  code: (v) => ({ DRAW: v.drawBuffer ? 'draw_buf[p.u_at]' : 'p.u' }),
});

/** Samples one token id from a contiguous logits row (previous tokens: contiguous int32 from element 0) into a new 1-element int32 buffer (-1: nothing samplable). */
export function sampleKernel(ctx: GpuContext, logits: GpuOperand, prev: GpuOperand | undefined, s: SamplingParams, drawFrom?: GpuOperand): GpuBuffer {
  const v = numel(logits.view.shape);
  const out = ctx.alloc(4);
  const work = ctx.alloc(v * 4);
  // A binding cannot be absent: without previous tokens a 4-byte placeholder stands in (never read).
  const placeholder = prev ? undefined : ctx.alloc(4);
  try {
    sample.run(
      ctx,
      { dtype: logits.dtype, drawBuffer: drawFrom !== undefined },
      {
        v, offset: logits.view.offset, n_prev: prev ? numel(prev.view.shape) : 0, top_k: s.topK,
        inv_temperature: s.invTemperature, top_p: s.topP, min_p: s.minP, u: s.u,
        inv_repetition: s.invRepetition, repetition: s.repetition, presence: s.presence, frequency: s.frequency,
        u_at: drawFrom?.view.offset ?? 0,
      },
      { token: out, work, logits: logits.buffer, prev: prev?.buffer ?? placeholder!, draw_buf: drawFrom?.buffer },
      { workgroups: [1, 1, 1] },
    );
    return out;
  } finally {
    ctx.release(work);
    if (placeholder) ctx.release(placeholder);
  }
}
