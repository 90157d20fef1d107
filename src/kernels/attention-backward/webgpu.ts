// Launcher of the fused attention backward (FlashAttention-2's, deterministic): attention-backward-dq.wgsl (one
// workgroup per query row and head: logsumexp L, D = dO.O and dq) then attention-backward-dkv.wgsl (one workgroup
// per key row and kv head: dk, dv), both recomputing the probabilities from q and k. Between and inside the two only
// [Hq, Sq] float32 (L and D) lives beyond the gradients: nothing [heads, Sq, Skv] is ever stored.
import { ShapeError } from '../../core/errors.js';
import { numel } from '../../core/shape.js';
import type { AttentionOptions } from '../../runtime/backend.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import type { GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { pow2AtLeast } from '../../runtime/webgpu/kernels/nn-util.js';
import { grid1d, workgroupReduce } from '../../runtime/webgpu/kernels/wgsl.js';

const WG = 64;
/** Head dims held in workgroup memory (two rows of DQ floats per workgroup, within WebGPU's 16 KiB default). */
const MAX_D = 1024;

const PARAMS = {
  sq: 'u32',
  hq: 'u32',
  skv: 'u32',
  hkv: 'u32',
  d: 'u32',
  group: 'u32',
  causal: 'u32',
  query_offset: 'i32',
  scale: 'f32',
  total_wg: 'u32',
  q_off: 'u32',
  qs0: 'u32',
  qs1: 'u32',
  qs2: 'u32',
  k_off: 'u32',
  ks0: 'u32',
  ks1: 'u32',
  ks2: 'u32',
  v_off: 'u32',
  vs0: 'u32',
  vs1: 'u32',
  vs2: 'u32',
  g_off: 'u32',
  gs0: 'u32',
  gs1: 'u32',
  gs2: 'u32',
} as const;

const VARIANT = { q: 'dtype', k: 'dtype', v: 'dtype', g: 'dtype', rounds: 'number' } as const;
const INPUTS = { q: { packed: 'q' }, k: { packed: 'k' }, v: { packed: 'v' }, g: { packed: 'g' } } as const;
// ROUNDS: head dims per invocation (ROUNDS * WG >= D); DQ: the workgroup rows' length.
const constants = (v: { rounds: number }) => ({ ROUNDS: v.rounds, DQ: v.rounds * WG });

const attentionBackwardDq = defineKernel({
  name: 'attention_backward_dq',
  source: 'attention-backward-dq.wgsl',
  variant: VARIANT,
  params: PARAMS,
  outputs: { dq: 'f32', lse: 'f32', delta: 'f32' },
  inputs: INPUTS,
  grid: 'custom',
  workgroupSize: WG,
  constants,
  functions: () => workgroupReduce({ name: 'reduce_row_state', type: 'RowState', combine: 'merge_states(a, b)' }),
});

const attentionBackwardDkv = defineKernel({
  name: 'attention_backward_dkv',
  source: 'attention-backward-dkv.wgsl',
  variant: VARIANT,
  params: PARAMS,
  outputs: { dk: 'f32', dv: 'f32' },
  inputs: { ...INPUTS, lse: 'f32', delta: 'f32' },
  grid: 'custom',
  workgroupSize: WG,
  constants,
});

/** Two dispatches: float32 [dq, dk, dv] (contiguous, shaped like q, k, v) of attention(q, k, v) given dOut. */
export function attentionBackwardKernel(
  ctx: GpuContext,
  q: GpuOperand,
  k: GpuOperand,
  v: GpuOperand,
  dOut: GpuOperand,
  options: AttentionOptions,
): [GpuBuffer, GpuBuffer, GpuBuffer] {
  const [sq, hq, d] = q.view.shape;
  const [skv, hkv] = k.view.shape;
  if (d > MAX_D) throw new ShapeError(`attentionBackward: the WebGPU kernel supports head dims up to ${MAX_D}, got ${d}`);
  const dq = ctx.alloc(wordBytes(numel(q.view.shape), 1));
  const dk = ctx.alloc(wordBytes(numel(k.view.shape), 1));
  const dv = ctx.alloc(wordBytes(numel(v.view.shape), 1));
  if (d === 0) return [dq, dk, dv];
  const rows = sq * hq;
  const lse = ctx.alloc(wordBytes(rows, 1));
  const delta = ctx.alloc(wordBytes(rows, 1));
  try {
    const params = {
      sq,
      hq,
      skv,
      hkv,
      d,
      group: hkv === 0 ? 1 : hq / hkv,
      causal: options.causal ? 1 : 0,
      // Offsets past either end of the keys all mean "every key" or "no key": clamping keeps i + offset in i32.
      query_offset: Math.max(-sq - 1, Math.min(skv, options.queryOffset)),
      scale: options.scale,
      q_off: q.view.offset,
      qs0: q.view.strides[0],
      qs1: q.view.strides[1],
      qs2: q.view.strides[2],
      k_off: k.view.offset,
      ks0: k.view.strides[0],
      ks1: k.view.strides[1],
      ks2: k.view.strides[2],
      v_off: v.view.offset,
      vs0: v.view.strides[0],
      vs1: v.view.strides[1],
      vs2: v.view.strides[2],
      g_off: dOut.view.offset,
      gs0: dOut.view.strides[0],
      gs1: dOut.view.strides[1],
      gs2: dOut.view.strides[2],
    };
    const variant = { q: q.dtype, k: k.dtype, v: v.dtype, g: dOut.dtype, rounds: pow2AtLeast(Math.ceil(d / WG)) };
    const inputs = { q: q.buffer, k: k.buffer, v: v.buffer, g: dOut.buffer };
    if (rows > 0) attentionBackwardDq.run(ctx, variant, { ...params, total_wg: rows }, { dq, lse, delta, ...inputs }, { workgroups: grid1d(rows, 1) });
    const keys = skv * hkv;
    if (keys > 0) attentionBackwardDkv.run(ctx, variant, { ...params, total_wg: keys }, { dk, dv, lse, delta, ...inputs }, { workgroups: grid1d(keys, 1) });
    return [dq, dk, dv];
  } finally {
    ctx.release(lse);
    ctx.release(delta);
  }
}
