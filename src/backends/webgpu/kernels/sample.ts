import { numel } from '../../../core/shape.js';
import type { SamplingParams } from '../../backend.js';
import type { GpuBuffer, GpuContext } from '../gpu-context.js';
import type { GpuOperand } from './elementwise.js';
import { commonWgsl, fillTemplate, loadFn, wgslSource } from './wgsl.js';

/** Samples one token id from a contiguous logits row (previous tokens: contiguous int32 from element 0) into a new 1-element int32 buffer (-1: nothing samplable). */
export function sampleKernel(ctx: GpuContext, logits: GpuOperand, prev: GpuOperand | undefined, s: SamplingParams, drawFrom?: GpuOperand): GpuBuffer {
  const v = numel(logits.view.shape);
  const out = ctx.alloc(4);
  const work = ctx.alloc(v * 4);
  // A binding cannot be absent: without previous tokens a 4-byte placeholder stands in (never read).
  const placeholder = prev ? undefined : ctx.alloc(4);
  const prevBuffer = prev?.buffer ?? placeholder!;
  try {
    // A captured step reads its draw from a buffer the caller rewrites each step, not from the recorded uniform.
    const pipeline = ctx.pipeline(`sample|${logits.dtype}|${drawFrom ? 'draw-buffer' : 'draw-uniform'}`, () =>
      commonWgsl() +
      fillTemplate(wgslSource(import.meta.url, 'sample.wgsl'), {
        FUNCTIONS: loadFn('load0', 'in0', logits.dtype, 'f32'),
        DRAW_BINDING: drawFrom ? '@group(0) @binding(5) var<storage, read> draw_buf: array<f32>;' : '',
        DRAW: drawFrom ? 'draw_buf[p.u_at]' : 'p.u',
      }),
    );
    const u = new DataView(new ArrayBuffer(64));
    u.setUint32(48, drawFrom?.view.offset ?? 0, true);
    const nPrev = prev ? numel(prev.view.shape) : 0;
    [v, logits.view.offset, nPrev, s.topK].forEach((x, i) => u.setUint32(i * 4, x, true));
    [s.invTemperature, s.topP, s.minP, s.u, s.invRepetition, s.repetition, s.presence, s.frequency].forEach((x, i) => u.setFloat32(16 + i * 4, x, true));
    ctx.dispatch(pipeline, u.buffer, [out, logits.buffer, work, prevBuffer, ...(drawFrom ? [drawFrom.buffer] : [])], [1, 1, 1]);
    return out;
  } finally {
    ctx.release(work);
    if (placeholder) ctx.release(placeholder);
  }
}
