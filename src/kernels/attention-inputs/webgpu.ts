// Launcher of attention-inputs.wgsl: q/k RMSNorm + RoPE + the KV-cache write of one layer in one dispatch, at a
// position that is a number, a device buffer's value (captured decode steps), or both added.
import { lanesPerWord, type DType } from '../../core/dtype.js';
import { isScaledKv, kvRowBytes } from '../../core/kv-fp8.js';
import type { AttentionInputsArgs } from './index.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import { bytesOf, defineKernel } from '../../runtime/webgpu/kernels/kernel.js';
import { pow2AtLeast } from '../../runtime/webgpu/kernels/nn-util.js';
import { cacheRowFn } from '../attention/webgpu.js';
import { grid1d } from '../../runtime/webgpu/kernels/wgsl.js';

/** The activation dtype's rounding (HF casts the normalized value back to it). */
function roundFn(dtype: DType): string {
  const v = dtype === 'float16' ? 'f16_to_f32(f32_to_f16(x))' : dtype === 'bfloat16' ? 'bf16_to_f32(f32_to_bf16(x))' : 'x';
  return `fn round_x(x: f32) -> f32 {\n  return ${v};\n}\n`;
}

const NORMALIZE = `red[t] = sum_sq;
    workgroupBarrier();
    for (var step = WG / 2u; step > 0u; step >>= 1u) {
      if (t < step) {
        red[t] += red[t + step];
      }
      workgroupBarrier();
    }
    let ms = red[0] / f32(p.d) + p.eps;
    let r = select(1.0 / sqrt(ms), ms, is_nan(ms));
    for (var c = t; c < p.d; c += WG) {
      let w = select(load_kn(p.kn_off + c), load_qn(p.qn_off + c), is_q);
      row[c] = round_x(w * round_x(row[c] * r));
    }`;

const NO_NORM = 'none';

/** A cache row's words from `first` (an element index): the value of element c is `value` with c bound. */
function cacheWrite(cache: 'k' | 'v', dtype: DType, value: string): string {
  const at = (c: string) => value.replaceAll('{c}', c);
  const n = cache.toUpperCase();
  if (!isScaledKv(dtype)) {
    return `    for (var w = t; w * ${n}_LANES < p.d; w += WG) {
      var word = 0u;
      for (var l = 0u; l < ${n}_LANES; l++) {
        word |= encode_${cache}_cache(${at(`w * ${n}_LANES + l`)}) << (l * ${n}_BITS);
      }
      ${cache}_cache[first / ${n}_LANES + w] = word;
    }`;
  }
  // core/kv-fp8.ts: the row's largest finite |x| sets a power-of-two scale, codes of x / scale, the scale last.
  return `    var amax = 0.0;
    for (var c = t; c < p.d; c += WG) {
      let a = abs(${at('c')});
      amax = select(amax, max(amax, a), a <= f32_bits(0x7f7fffffu));
    }
    red[t] = amax;
    workgroupBarrier();
    for (var step = WG / 2u; step > 0u; step >>= 1u) {
      if (t < step) {
        red[t] = max(red[t], red[t + step]);
      }
      workgroupBarrier();
    }
    let e = kv_scale_exp(red[0]);
    let inv = bitcast<f32>(u32(127 - e) << 23u);
    let code_words = (p.d + 3u) / 4u;
    for (var w = t; w < code_words; w += WG) {
      var word = 0u;
      for (var l = 0u; l < 4u; l++) {
        let c = w * 4u + l;
        if (c < p.d) {
          word |= encode_${cache}_cache(${at('c')} * inv) << (l * 8u);
        }
      }
      ${cache}_cache[first / 4u + w] = word;
    }
    if (t == 0u) {
      ${cache}_cache[first / 4u + code_words] = u32(127 + e) << 23u;
    }`;
}

/** e of an FP8 cache row's scale 2^e from its largest finite |x| (core/kv-fp8.ts kvScaleExponent). */
const KV_SCALE_EXP = `fn kv_scale_exp(amax: f32) -> i32 {
  let a = bitcast<u32>(amax);
  if (a == 0u || a >= 0x7f800000u) {
    return 0;
  }
  let e = i32(a >> 23u) - 127 - select(7, 8, (a & 0x7fffffu) <= 0x600000u);
  return clamp(e, -126, 127);
}
`;

const attentionInputs = defineKernel({
  name: 'attention-inputs',
  source: 'attention-inputs.wgsl',
  // qn, kn: the q/k norm weights' dtypes, or NO_NORM; maxD: the row's workgroup array (a power of two >= D).
  variant: { q: 'dtype', k: 'dtype', v: 'dtype', qn: 'string', kn: 'string', posBuffer: 'boolean', maxD: 'number', paged: 'boolean' },
  params: {
    s: 'u32',
    heads: 'u32',
    kv_heads: 'u32',
    d: 'u32',
    rot_half: 'u32',
    qkv_off: 'u32',
    qkv_s0: 'u32',
    qn_off: 'u32',
    kn_off: 'u32',
    cos_off: 'u32',
    cs0: 'u32',
    sin_off: 'u32',
    ss0: 'u32',
    k_off: 'u32',
    ks0: 'u32',
    ks1: 'u32',
    v_off: 'u32',
    vs0: 'u32',
    vs1: 'u32',
    pos0: 'u32',
    pos_at: 'u32',
    capacity: 'u32',
    table_len: 'u32',
    eps: 'f32',
    total: 'u32',
    page_size: 'u32',
    pages_at: 'u32',
  },
  // q, and the k / v rows written in place into the caches.
  outputs: { out: { packed: 'q' }, k_cache: { packed: 'k' }, v_cache: { packed: 'v' } },
  inputs: {
    qkv: { packed: 'q' },
    cos_t: 'f32',
    sin_t: 'f32',
    qn: { packed: (v) => v.qn as DType, when: (v) => v.qn !== NO_NORM },
    kn: { packed: (v) => v.kn as DType, when: (v) => v.kn !== NO_NORM },
    pos_buf: { type: 'u32', when: (v) => v.posBuffer },
    pages: { type: 'i32', when: (v) => v.paged },
  },
  grid: 'custom',
  workgroupSize: 64,
  constants: (v) => {
    const c: Record<string, number> = { MAX_D: v.maxD };
    for (const [n, dt] of [
      ['Q', v.q],
      ['K', v.k],
      ['V', v.v],
    ] as const) {
      c[`${n}_LANES`] = lanesPerWord(dt);
      c[`${n}_BITS`] = 32 / lanesPerWord(dt);
    }
    return c;
  },
  functions: (v) => roundFn(v.q) + (isScaledKv(v.k) || isScaledKv(v.v) ? KV_SCALE_EXP : ''),
  code: (v) => ({
    POSITION: v.paged ? 'u32(pages[p.pages_at + 2u * s])' : v.posBuffer ? 'p.pos0 + u32(bitcast<i32>(pos_buf[p.pos_at])) + s' : 'p.pos0 + s',
    TABLE_AT: v.paged ? '  table_at = p.pages_at + u32(pages[p.pages_at + 2u * s + 1u]);' : '',
    NORMALIZE: v.qn !== NO_NORM ? NORMALIZE : '',
    CACHE_ROW: cacheRowFn(v.paged),
    K_WRITE: cacheWrite('k', v.k, 'round_x(roped({c}, pos))'),
    V_WRITE: cacheWrite('v', v.v, 'row[{c}]'),
  }),
});

/** Returns q [S, Hq, D] (qkv's dtype); writes k and v rows into the caches. Views are as the op validated them. */
export function attentionInputsKernel(ctx: GpuContext, a: AttentionInputsArgs<GpuBuffer>): GpuBuffer {
  const { heads, kvHeads, headDim: d } = a;
  const qkv = a.qkv;
  const s = qkv.view.shape[0];
  const qDtype = qkv.dtype;
  const out = ctx.alloc(wordBytes(s * heads * d, lanesPerWord(qDtype)));
  const total = s * (heads + 2 * kvHeads);
  if (total === 0 || d === 0) return out;
  const norm = a.qNorm !== undefined;
  const k = a.keys.view;
  const v = a.values.view;
  attentionInputs.run(
    ctx,
    {
      q: qDtype,
      k: a.keys.dtype,
      v: a.values.dtype,
      qn: norm ? a.qNorm!.dtype : NO_NORM,
      kn: norm ? a.kNorm!.dtype : NO_NORM,
      posBuffer: a.positionFrom !== undefined,
      maxD: Math.max(64, pow2AtLeast(d)),
      paged: a.pages !== undefined,
    },
    {
      s,
      heads,
      kv_heads: kvHeads,
      d,
      rot_half: (a.rotaryDim ?? d) / 2,
      qkv_off: qkv.view.offset,
      qkv_s0: qkv.view.strides[0],
      qn_off: a.qNorm?.view.offset ?? 0,
      kn_off: a.kNorm?.view.offset ?? 0,
      cos_off: a.cos.view.offset,
      cs0: a.cos.view.strides[0],
      sin_off: a.sin.view.offset,
      ss0: a.sin.view.strides[0],
      k_off: k.offset,
      ks0: k.strides[0],
      ks1: k.strides[1],
      v_off: v.offset,
      vs0: v.strides[0],
      vs1: v.strides[1],
      pos0: a.position,
      pos_at: a.positionFrom?.view.offset ?? 0,
      // Paged: the host built each row's pages to hold it.
      capacity: a.pages ? 0xffffffff : k.shape[0],
      table_len: a.cos.view.shape[0],
      eps: a.eps,
      total,
      page_size: a.pages?.pageSize ?? 1,
      pages_at: a.pages?.index.view.offset ?? 0,
    },
    {
      out,
      k_cache: a.keys.handle,
      v_cache: a.values.handle,
      qkv: qkv.handle,
      cos_t: a.cos.handle,
      sin_t: a.sin.handle,
      qn: a.qNorm?.handle,
      kn: a.kNorm?.handle,
      pos_buf: a.positionFrom?.handle,
      pages: a.pages?.index.handle,
    },
    {
      workgroups: grid1d(total, 1),
      // q|k|v read once, q written, one k and v row per kv head written into the cache, cos and sin rows read.
      bytes:
        bytesOf(qDtype, s * (heads + 2 * kvHeads) * d) +
        bytesOf(qDtype, s * heads * d) +
        s * kvHeads * (kvRowBytes(a.keys.dtype, d) + kvRowBytes(a.values.dtype, d)) +
        bytesOf(a.cos.dtype, s * d) +
        bytesOf(a.sin.dtype, s * d),
    },
  );
  return out;
}
