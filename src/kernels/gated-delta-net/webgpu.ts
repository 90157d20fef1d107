// Launcher of gated-delta-net.wgsl: one Gated DeltaNet layer's conv, delta rule and gated norm in one dispatch, its
// conv and recurrent states read and rewritten in place. Prompts of chunkedFrom tokens or more take the chunked
// form instead (gated-delta-net-chunked.ts): four dispatches, the state carried across 64-token chunks.
import type { GatedDeltaNetArgs } from './index.js';
import type { GpuBuffer, GpuContext } from '../../runtime/webgpu/gpu-context.js';
import { gatedDeltaNetChunked } from './webgpu-chunked.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { pow2AtLeast } from '../../runtime/webgpu/kernels/nn-util.js';
import { workgroupReduce } from '../../runtime/webgpu/kernels/wgsl.js';

/** One invocation per state column (dv = 128 in the released models), up to the 256 every adapter allows. */
const WG = 128;

const gatedDeltaNet = defineKernel({
  name: 'gated-delta-net',
  source: 'gated-delta-net.wgsl',
  // cols: state columns per invocation; maxQk: the workgroup array for q and k (a power of two >= 2 dk).
  variant: { proj: 'dtype', conv: 'dtype', head: 'dtype', cols: 'number', maxQk: 'number', segmented: 'boolean' },
  params: {
    s: 'u32',
    hk: 'u32',
    hv: 'u32',
    dk: 'u32',
    dv: 'u32',
    taps: 'u32',
    qkv_off: 'u32',
    qkv_s0: 'u32',
    z_off: 'u32',
    z_s0: 'u32',
    b_off: 'u32',
    b_s0: 'u32',
    a_off: 'u32',
    a_s0: 'u32',
    w_off: 'u32',
    w_s0: 'u32',
    w_s1: 'u32',
    alog_off: 'u32',
    dt_off: 'u32',
    nw_off: 'u32',
    cs_off: 'u32',
    st_off: 'u32',
    eps: 'f32',
    seg_off: 'u32',
  },
  outputs: { out: 'f32', conv_state: 'f32', state: 'f32' },
  // One projection buffer holds q|k|v, z, b and a; one parameter buffer A_log, dt_bias and the norm weight (the op
  // packs them when the caller's tensors are apart): 6 storage bindings, within every adapter's 8.
  inputs: {
    proj: { packed: 'proj' },
    conv_w: { packed: 'conv' },
    head: { packed: 'head' },
    segs: { type: 'i32', when: (v) => v.segmented },
  },
  grid: 'custom',
  workgroupSize: WG,
  constants: (v) => ({ COLS: v.cols, MAX_QK: v.maxQk }),
  // The q and k sums of squares together, then o's alone (y = 0): one scratch for both.
  functions: () => workgroupReduce({ name: 'reduce_pair', type: 'vec2<f32>', combine: 'a + b' }),
  code: (v) => ({ SEGMENT: v.segmented ? SEGMENTED : WHOLE }),
});

/**
 * Which form a call of S tokens takes. The recurrent kernel is one dispatch but walks the S tokens in order in Hv
 * workgroups, sweeping the whole [dk, dv] state through memory at every token; the chunked one costs four
 * dispatches and a scratch, then walks S/64 chunks with the state in workgroup memory across Hv dv/16 workgroups.
 * From one full chunk (64 tokens: 64 sequential state sweeps against one chunk step) the chunked form wins on a
 * GPU; below it, decode (S = 1) and short speculative-verify batches keep the single dispatch.
 */
export const gatedDeltaNetTuning = { chunkedFrom: 64 };

/** One sequence: all S rows, the states as given. */
const WHOLE = `  if (t == 0u) {
    sh_first = 0u;
    sh_rows = p.s;
    sh_slot = 0u;
  }`;

/** A batch: workgroup row y is segment y's (first row, rows, state slot). */
const SEGMENTED = `  if (t == 0u) {
    let at = p.seg_off + 3u * wid.y;
    sh_first = u32(segs[at]);
    sh_rows = u32(segs[at + 1u]);
    sh_slot = u32(segs[at + 2u]);
  }`;

/**
 * Returns float32 [S, Hv dv]. A batch of sequences (segments) always takes the recurrent kernel, one workgroup row
 * per sequence: the server's decode steps, where each sequence adds one row.
 */
export function gatedDeltaNetKernel(ctx: GpuContext, a: GatedDeltaNetArgs<GpuBuffer>): GpuBuffer {
  const s = a.qkv.view.shape[0];
  const { keyHeads: hk, valueHeads: hv, keyDim: dk, valueDim: dv } = a;
  const out = ctx.alloc(Math.max(4, s * hv * dv * 4));
  if (s === 0 || a.segments?.count === 0) return out;
  if (s >= gatedDeltaNetTuning.chunkedFrom && !a.segments) {
    try {
      gatedDeltaNetChunked(ctx, a, out);
    } catch (e) {
      ctx.release(out);
      throw e;
    }
    return out;
  }
  const w = a.convWeight.view;
  gatedDeltaNet.run(
    ctx,
    {
      proj: a.qkv.dtype,
      conv: a.convWeight.dtype,
      head: a.aLog.dtype,
      cols: Math.ceil(dv / WG),
      maxQk: pow2AtLeast(2 * dk),
      segmented: a.segments !== undefined,
    },
    {
      s,
      hk,
      hv,
      dk,
      dv,
      taps: w.shape[1],
      qkv_off: a.qkv.view.offset,
      qkv_s0: a.qkv.view.strides[0],
      z_off: a.z.view.offset,
      z_s0: a.z.view.strides[0],
      b_off: a.b.view.offset,
      b_s0: a.b.view.strides[0],
      a_off: a.a.view.offset,
      a_s0: a.a.view.strides[0],
      w_off: w.offset,
      w_s0: w.strides[0],
      w_s1: w.strides[1],
      alog_off: a.aLog.view.offset,
      dt_off: a.dtBias.view.offset,
      nw_off: a.normWeight.view.offset,
      cs_off: a.convState.view.offset,
      st_off: a.state.view.offset,
      eps: a.eps,
      seg_off: a.segments?.index.view.offset ?? 0,
    },
    {
      out,
      conv_state: a.convState.handle,
      state: a.state.handle,
      proj: a.qkv.handle,
      conv_w: a.convWeight.handle,
      head: a.aLog.handle,
      segs: a.segments?.index.handle,
    },
    { workgroups: [hv, a.segments?.count ?? 1, 1] },
  );
  return out;
}
