// Launchers of the chunked Gated DeltaNet prefill (the WY / UT form of flash-linear-attention's
// chunk_gated_delta_rule and transformers' torch_chunk_gated_delta_rule, chunk size 64): the same outputs and
// states as the recurrent kernel (gated-delta-net.wgsl) in four dispatches whatever the prompt length,
//   1. prep  (token, key head): conv + SiLU + l2 norms of q, k, v          -> qk, vu scratch
//   2. chunk (chunk, value head): decay, the intra-chunk A and P, the unit lower-triangular solve for U and W
//                                                                         -> vu (U in place of v), wp scratch
//   3. scan  (value head, CB state columns): the state across chunks in workgroup memory, o before the norm -> out;
//      also the conv window
//   4. norm  (token, value head): the gated RMSNorm, in place on out.
// Only pass 3 walks the chunks in order; passes 1, 2 and 4 are parallel over tokens or chunks and heads.
// Scratch per token (float32): qk 2 Hk dk (plus (Hv - Hk) 2 dk for each of the first taps-1 tokens, see
// qk_base), vu Hv dv, wp Hv (dk + 1 + 64) (W, G, and P's 64x64 per chunk). A prompt whose scratch would pass
// gatedDeltaNetChunkedTuning.scratchBytes (or the binding limit) runs in segments of whole chunks, four
// dispatches each, every segment continuing from the states the previous one left.
import type { GatedDeltaNetArgs } from './index.js';
import type { GpuBuffer, GpuContext } from '../../runtime/webgpu/gpu-context.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { wgslSource, workgroupReduce } from '../../runtime/webgpu/kernels/wgsl.js';

/** Tokens per chunk: the lower-triangular solve is sequential over its rows, the scan over chunks. */
export const GDN_CHUNK = 64;
/** Columns of pass 2's dot-product tiles. */
const TILE_K = 16;
/** Workgroup memory of pass 3's state block (dk x CB floats): 8 KiB, with its chunk values ~12.5 KiB in all. */
const STATE_BLOCK = 2048;

/** Scratch bytes one segment may use per buffer (a longer prompt runs in segments): tests lower it. */
export const gatedDeltaNetChunkedTuning = { scratchBytes: 64 * 2 ** 20 };

const common = () => wgslSource('gated-delta-net-chunked-common.wgsl');
const LAYOUT = { hk: 'u32', hv: 'u32', dk: 'u32', dv: 'u32', head_rows: 'u32' } as const;

const prep = defineKernel({
  name: 'gated-delta-net-prep',
  source: 'gated-delta-net-prep.wgsl',
  variant: { qkv: 'dtype', conv: 'dtype' },
  params: { s: 'u32', ...LAYOUT, taps: 'u32', items: 'u32', qkv_off: 'u32', qkv_s0: 'u32', w_off: 'u32', w_s0: 'u32', w_s1: 'u32', cs_off: 'u32' },
  outputs: { qk: 'f32', vu: 'f32' },
  inputs: { conv_state: 'f32', qkv: { packed: 'qkv' }, conv_w: { packed: 'conv' } },
  grid: 'custom',
  workgroupSize: 128,
  functions: () => common() + workgroupReduce({ name: 'reduce_pair', type: 'vec2<f32>', combine: 'a + b' }),
});

const chunk = defineKernel({
  name: 'gated-delta-net-chunk',
  source: 'gated-delta-net-chunk.wgsl',
  variant: { a: 'dtype', b: 'dtype', aLog: 'dtype', dt: 'dtype' },
  params: {
    s: 'u32',
    ...LAYOUT,
    chunks: 'u32',
    a_off: 'u32',
    a_s0: 'u32',
    b_off: 'u32',
    b_s0: 'u32',
    alog_off: 'u32',
    dt_off: 'u32',
    p_off: 'u32',
    g_off: 'u32',
  },
  outputs: { vu: 'f32', wp: 'f32' },
  inputs: { qk: 'f32', a: { packed: 'a' }, b: { packed: 'b' }, a_log: { packed: 'aLog' }, dt_bias: { packed: 'dt' } },
  grid: 'custom',
  workgroupSize: 256,
  constants: () => ({ C: GDN_CHUNK, TI: TILE_K }),
  functions: common,
});

const scan = defineKernel({
  name: 'gated-delta-net-scan',
  source: 'gated-delta-net-scan.wgsl',
  // cb: state columns per workgroup (16, or 8 when dk > 128, so the block stays 8 KiB).
  variant: { qkv: 'dtype', cb: 'number' },
  params: {
    s: 'u32',
    ...LAYOUT,
    taps: 'u32',
    blocks: 'u32',
    p_off: 'u32',
    g_off: 'u32',
    out_off: 'u32',
    st_off: 'u32',
    cs_off: 'u32',
    qkv_off: 'u32',
    qkv_s0: 'u32',
  },
  outputs: { out: 'f32', state: 'f32', conv_state: 'f32' },
  inputs: { qk: 'f32', vu: 'f32', wp: 'f32', qkv: { packed: 'qkv' } },
  grid: 'custom',
  // Invocation (r, cq) of pass 3 takes chunk row r = tid % 64 and columns cq + 4 m: 4 x 64.
  workgroupSize: 4 * GDN_CHUNK,
  constants: (v) => ({ C: GDN_CHUNK, CB: v.cb, DK_CB: STATE_BLOCK }),
  functions: common,
});

const norm = defineKernel({
  name: 'gated-delta-net-norm',
  source: 'gated-delta-net-norm.wgsl',
  variant: { z: 'dtype', norm: 'dtype' },
  params: { rows: 'u32', hv: 'u32', dv: 'u32', out_off: 'u32', z_off: 'u32', z_s0: 'u32', nw_off: 'u32', eps: 'f32' },
  outputs: { out: 'f32' },
  inputs: { z: { packed: 'z' }, norm_w: { packed: 'norm' } },
  grid: 'custom',
  workgroupSize: 128,
  functions: () => 'fn silu(x: f32) -> f32 {\n  return x / (1.0 + exp(-x));\n}\n' + workgroupReduce({ name: 'row_sum', type: 'f32', combine: 'a + b' }),
});

/** Workgroups for `n` independent items, folded past 65535 in x. */
function groups(n: number): [number, number, number] {
  const x = Math.min(Math.max(1, n), 65535);
  return [x, Math.ceil(Math.max(1, n) / x), 1];
}

/** Float32 sizes of the three scratch buffers for a segment of `s` tokens. */
function scratchFloats(s: number, hk: number, hv: number, dk: number, dv: number, win: number) {
  const headRows = Math.min(win, s);
  const chunks = Math.ceil(s / GDN_CHUNK);
  return {
    qk: (headRows * hv + (s - headRows) * hk) * 2 * dk,
    vu: s * hv * dv,
    wp: s * hv * dk + chunks * hv * GDN_CHUNK * GDN_CHUNK + s * hv,
  };
}

/** Runs the chunked form into out (float32 [S, Hv dv]); the states of `a` are read and rewritten in place. */
export function gatedDeltaNetChunked(ctx: GpuContext, a: GatedDeltaNetArgs<GpuBuffer>, out: GpuBuffer): void {
  const s = a.qkv.view.shape[0];
  const { keyHeads: hk, valueHeads: hv, keyDim: dk, valueDim: dv } = a;
  const w = a.convWeight.view;
  const taps = w.shape[1];
  const win = taps - 1;
  // Whole chunks per segment: as many as keep every scratch buffer within the budget and the binding limit.
  const budget = Math.min(gatedDeltaNetChunkedTuning.scratchBytes, ctx.limits.maxStorageBufferBindingSize);
  const perChunk = scratchFloats(GDN_CHUNK, hk, hv, dk, dv, 0);
  const headExtra = win * (hv - hk) * 2 * dk;
  const fit = Math.floor(Math.min((budget / 4 - headExtra) / perChunk.qk, budget / 4 / perChunk.vu, budget / 4 / perChunk.wp));
  const segment = Math.min(s, Math.max(1, fit) * GDN_CHUNK);
  const size = scratchFloats(segment, hk, hv, dk, dv, win);
  const qk = ctx.alloc(size.qk * 4);
  const vu = ctx.alloc(size.vu * 4);
  const wp = ctx.alloc(size.wp * 4);
  const cb = dk > 128 ? 8 : 16;
  const blocks = Math.ceil(dv / cb);
  const layout = { hk, hv, dk, dv };
  try {
    for (let t0 = 0; t0 < s; t0 += segment) {
      const n = Math.min(segment, s - t0);
      const chunks = Math.ceil(n / GDN_CHUNK);
      const headRows = Math.min(win, n);
      const items = headRows * hv + (n - headRows) * hk;
      const qkvOff = a.qkv.view.offset + t0 * a.qkv.view.strides[0];
      const wpLayout = { p_off: n * hv * dk, g_off: n * hv * dk + chunks * hv * GDN_CHUNK * GDN_CHUNK };
      prep.run(
        ctx,
        { qkv: a.qkv.dtype, conv: a.convWeight.dtype },
        {
          s: n,
          ...layout,
          head_rows: headRows,
          taps,
          items,
          qkv_off: qkvOff,
          qkv_s0: a.qkv.view.strides[0],
          w_off: w.offset,
          w_s0: w.strides[0],
          w_s1: w.strides[1],
          cs_off: a.convState.view.offset,
        },
        { qk, vu, conv_state: a.convState.handle, qkv: a.qkv.handle, conv_w: a.convWeight.handle },
        { workgroups: groups(items) },
      );
      chunk.run(
        ctx,
        { a: a.a.dtype, b: a.b.dtype, aLog: a.aLog.dtype, dt: a.dtBias.dtype },
        {
          s: n,
          ...layout,
          head_rows: headRows,
          chunks,
          a_off: a.a.view.offset + t0 * a.a.view.strides[0],
          a_s0: a.a.view.strides[0],
          b_off: a.b.view.offset + t0 * a.b.view.strides[0],
          b_s0: a.b.view.strides[0],
          alog_off: a.aLog.view.offset,
          dt_off: a.dtBias.view.offset,
          ...wpLayout,
        },
        { vu, wp, qk, a: a.a.handle, b: a.b.handle, a_log: a.aLog.handle, dt_bias: a.dtBias.handle },
        { workgroups: groups(chunks * hv) },
      );
      scan.run(
        ctx,
        { qkv: a.qkv.dtype, cb },
        {
          s: n,
          ...layout,
          head_rows: headRows,
          taps,
          blocks,
          ...wpLayout,
          out_off: t0 * hv * dv,
          st_off: a.state.view.offset,
          cs_off: a.convState.view.offset,
          qkv_off: qkvOff,
          qkv_s0: a.qkv.view.strides[0],
        },
        { out, state: a.state.handle, conv_state: a.convState.handle, qk, vu, wp, qkv: a.qkv.handle },
        { workgroups: groups(hv * blocks) },
      );
      norm.run(
        ctx,
        { z: a.z.dtype, norm: a.normWeight.dtype },
        {
          rows: n * hv,
          hv,
          dv,
          out_off: t0 * hv * dv,
          z_off: a.z.view.offset + t0 * a.z.view.strides[0],
          z_s0: a.z.view.strides[0],
          nw_off: a.normWeight.view.offset,
          eps: a.eps,
        },
        { out, z: a.z.handle, norm_w: a.normWeight.handle },
        { workgroups: groups(n * hv) },
      );
    }
  } finally {
    ctx.release(qk);
    ctx.release(vu);
    ctx.release(wp);
  }
}
