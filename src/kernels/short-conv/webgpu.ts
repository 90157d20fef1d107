// Launcher of short-conv.wgsl: LFM2's gated causal conv of one layer, its state read and updated in the same dispatch.
import type { DType } from '../../core/dtype.js';
import type { ShortConvArgs } from './index.js';
import type { GpuBuffer, GpuContext } from '../../runtime/webgpu/gpu-context.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';

/** Taps - 1 the kernel's register window holds (LFM2 uses 3 taps). */
export const SHORT_CONV_MAX_WINDOW = 8; // ops/short-conv.ts allows at most 9 taps

const shortConv = defineKernel({
  name: 'short-conv',
  source: 'short-conv.wgsl',
  // bias: its dtype, or 'none'.
  // segmented: a batch of sequences, each (first row, rows, state slot) read from segs.
  variant: { dtype: 'dtype', weight: 'dtype', bias: 'string', segmented: 'boolean' },
  params: {
    n: 'u32',
    s: 'u32',
    h: 'u32',
    taps: 'u32',
    in_off: 'u32',
    w_off: 'u32',
    w_s0: 'u32',
    w_s1: 'u32',
    st_off: 'u32',
    b_off: 'u32',
    seg_off: 'u32',
  },
  // The state is read and rewritten in place, so it is bound read_write with the output.
  outputs: { out: 'f32', state: 'f32' },
  inputs: {
    bcx: { packed: 'dtype' },
    conv_w: { packed: 'weight' },
    conv_b: { packed: (v) => v.bias as DType, when: (v) => v.bias !== 'none' },
    segs: { type: 'i32', when: (v) => v.segmented },
  },
  // One invocation per (sequence, channel).
  grid: { threads: 'n', invoke: 'conv_channel' },
  workgroupSize: 64,
  constants: () => ({ MAX_WINDOW: SHORT_CONV_MAX_WINDOW }),
  code: (v) => ({ BIAS: v.bias !== 'none' ? 'load_conv_b(p.b_off + c)' : '0.0', SEGMENT: v.segmented ? SEGMENTED : WHOLE }),
});

/** One sequence: all S rows, the state as given. */
const WHOLE = `  let first = 0u;
  let rows = p.s;
  let st = p.st_off;`;

/** A batch: invocation i / H is sequence (first row, rows, state slot) of segs, whose state is one [L-1, H] slot of the pool. */
const SEGMENTED = `  let at = p.seg_off + 3u * seq;
  let first = u32(segs[at]);
  let rows = u32(segs[at + 1u]);
  let st = p.st_off + u32(segs[at + 2u]) * window * p.h;`;

/** Returns float32 [S, H]; writes the last taps-1 Bx values into the state. */
export function shortConvKernel(ctx: GpuContext, a: ShortConvArgs<GpuBuffer>): GpuBuffer {
  const s = a.bcx.view.shape[0];
  const h = a.weight.view.shape[0];
  const taps = a.weight.view.shape[1];
  const out = ctx.alloc(Math.max(4, s * h * 4));
  const count = a.segments ? a.segments.count : 1;
  if (h === 0 || count === 0) return out;
  const w = a.weight.view;
  shortConv.run(
    ctx,
    { dtype: a.bcx.dtype, weight: a.weight.dtype, bias: a.bias?.dtype ?? 'none', segmented: a.segments !== undefined },
    {
      n: count * h,
      s,
      h,
      taps,
      in_off: a.bcx.view.offset,
      w_off: w.offset,
      w_s0: w.strides[0],
      w_s1: w.strides[1],
      st_off: a.state.view.offset,
      b_off: a.bias?.view.offset ?? 0,
      seg_off: a.segments?.index.view.offset ?? 0,
    },
    { out, state: a.state.handle, bcx: a.bcx.handle, conv_w: a.weight.handle, conv_b: a.bias?.handle, segs: a.segments?.index.handle },
  );
  return out;
}
