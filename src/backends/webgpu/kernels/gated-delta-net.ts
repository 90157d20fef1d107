// Launcher of gated-delta-net.wgsl: one Gated DeltaNet layer's conv, delta rule and gated norm in one dispatch, its
// conv and recurrent states read and rewritten in place.
import type { GatedDeltaNetArgs } from '../../backend.js';
import type { GpuBuffer, GpuContext } from '../gpu-context.js';
import { defineKernel } from './kernel.js';
import { pow2AtLeast } from './nn-util.js';

/** One invocation per state column (dv = 128 in the released models), up to the 256 every adapter allows. */
const WG = 128;

const gatedDeltaNet = defineKernel({
  name: 'gated-delta-net',
  source: 'gated-delta-net.wgsl',
  // cols: state columns per invocation; maxQk: the workgroup array for q and k (a power of two >= 2 dk).
  variant: { qkv: 'dtype', z: 'dtype', b: 'dtype', a: 'dtype', conv: 'dtype', aLog: 'dtype', dt: 'dtype', norm: 'dtype', cols: 'number', maxQk: 'number' },
  params: {
    s: 'u32', hk: 'u32', hv: 'u32', dk: 'u32', dv: 'u32', taps: 'u32',
    qkv_off: 'u32', qkv_s0: 'u32', z_off: 'u32', z_s0: 'u32', b_off: 'u32', b_s0: 'u32', a_off: 'u32', a_s0: 'u32',
    w_off: 'u32', w_s0: 'u32', w_s1: 'u32', alog_off: 'u32', dt_off: 'u32', nw_off: 'u32',
    cs_off: 'u32', st_off: 'u32', eps: 'f32',
  },
  outputs: { out: 'f32', conv_state: 'f32', state: 'f32' },
  inputs: {
    qkv: { packed: 'qkv' },
    z: { packed: 'z' },
    b: { packed: 'b' },
    a: { packed: 'a' },
    conv_w: { packed: 'conv' },
    a_log: { packed: 'aLog' },
    dt_bias: { packed: 'dt' },
    norm_w: { packed: 'norm' },
  },
  grid: 'custom',
  workgroupSize: WG,
  constants: (v) => ({ COLS: v.cols, MAX_QK: v.maxQk }),
});

/** Returns float32 [S, Hv dv]. */
export function gatedDeltaNetKernel(ctx: GpuContext, a: GatedDeltaNetArgs<GpuBuffer>): GpuBuffer {
  const s = a.qkv.view.shape[0];
  const { keyHeads: hk, valueHeads: hv, keyDim: dk, valueDim: dv } = a;
  const out = ctx.alloc(Math.max(4, s * hv * dv * 4));
  if (s === 0) return out;
  const w = a.convWeight.view;
  gatedDeltaNet.run(
    ctx,
    {
      qkv: a.qkv.dtype, z: a.z.dtype, b: a.b.dtype, a: a.a.dtype, conv: a.convWeight.dtype, aLog: a.aLog.dtype, dt: a.dtBias.dtype, norm: a.normWeight.dtype,
      cols: Math.ceil(dv / WG), maxQk: pow2AtLeast(2 * dk),
    },
    {
      s, hk, hv, dk, dv, taps: w.shape[1],
      qkv_off: a.qkv.view.offset, qkv_s0: a.qkv.view.strides[0],
      z_off: a.z.view.offset, z_s0: a.z.view.strides[0],
      b_off: a.b.view.offset, b_s0: a.b.view.strides[0],
      a_off: a.a.view.offset, a_s0: a.a.view.strides[0],
      w_off: w.offset, w_s0: w.strides[0], w_s1: w.strides[1],
      alog_off: a.aLog.view.offset, dt_off: a.dtBias.view.offset, nw_off: a.normWeight.view.offset,
      cs_off: a.convState.view.offset, st_off: a.state.view.offset, eps: a.eps,
    },
    { out, conv_state: a.convState.handle, state: a.state.handle, qkv: a.qkv.handle, z: a.z.handle, b: a.b.handle, a: a.a.handle, conv_w: a.convWeight.handle, a_log: a.aLog.handle, dt_bias: a.dtBias.handle, norm_w: a.normWeight.handle },
    { workgroups: [hv, 1, 1] },
  );
  return out;
}
