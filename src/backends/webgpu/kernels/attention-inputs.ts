// Launcher of attention-inputs.wgsl: q/k RMSNorm + RoPE + the KV-cache write of one layer in one dispatch, at a
// position that is a number, a device buffer's value (captured decode steps), or both added.
import { lanesPerWord, type DType } from '../../../core/dtype.js';
import type { AttentionInputsArgs } from '../../backend.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../gpu-context.js';
import { pow2AtLeast, uniformWords } from './nn-util.js';
import { commonWgsl, encodeFn, fillTemplate, grid1d, loadFn, wgslSource } from './wgsl.js';

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
  const extras: string[] = [];
  const extraBuffers: GpuBuffer[] = [];
  let binding = 7;
  const bind = (name: string, b: GpuBuffer) => {
    extras.push(`@group(0) @binding(${binding++}) var<storage, read> ${name}: array<u32>;`);
    extraBuffers.push(b);
  };
  if (norm) {
    bind('qn_buf', a.qNorm!.handle);
    bind('kn_buf', a.kNorm!.handle);
  }
  if (a.positionFrom) bind('pos_buf', a.positionFrom.handle);
  const kD = a.keys.dtype;
  const vD = a.values.dtype;
  const maxD = Math.max(64, pow2AtLeast(d));
  const key = ['attention-inputs', qDtype, kD, vD, norm ? `${a.qNorm!.dtype},${a.kNorm!.dtype}` : 'no-norm', a.positionFrom ? 'pos-buffer' : 'pos-uniform', maxD].join('|');
  const lanes = (dt: DType) => lanesPerWord(dt);
  const pipeline = ctx.pipeline(key, () =>
    commonWgsl() +
    fillTemplate(wgslSource(import.meta.url, 'attention-inputs.wgsl'), {
      EXTRA_BINDINGS: extras.join('\n'),
      FUNCTIONS:
        loadFn('load_qkv', 'qkv', qDtype, 'f32') +
        (norm ? loadFn('load_qn', 'qn_buf', a.qNorm!.dtype, 'f32') + loadFn('load_kn', 'kn_buf', a.kNorm!.dtype, 'f32') : '') +
        roundFn(qDtype) +
        encodeFn('encode_q', qDtype, 'f32') +
        encodeFn('encode_k', kD, 'f32') +
        encodeFn('encode_v', vD, 'f32') +
        [['Q', qDtype], ['K', kD], ['V', vD]].map(([n, dt]) => `const ${n}_LANES = ${lanes(dt as DType)}u;\nconst ${n}_BITS = ${32 / lanes(dt as DType)}u;\n`).join(''),
      MAX_D: maxD,
      POSITION: a.positionFrom ? 'p.pos0 + u32(bitcast<i32>(pos_buf[p.pos_at]))' : 'p.pos0',
      NORMALIZE: norm ? NORMALIZE : '',
    }),
  );
  const k = a.keys.view;
  const v = a.values.view;
  const params = uniformWords([
    s, heads, kvHeads, d,
    qkv.view.offset, qkv.view.strides[0],
    a.qNorm?.view.offset ?? 0, a.kNorm?.view.offset ?? 0,
    a.cos.view.offset, a.cos.view.strides[0], a.sin.view.offset, a.sin.view.strides[0],
    k.offset, k.strides[0], k.strides[1],
    v.offset, v.strides[0], v.strides[1],
    a.position, a.positionFrom?.view.offset ?? 0,
    k.shape[0], a.cos.view.shape[0],
    { f32: a.eps }, total,
  ]);
  ctx.dispatch(pipeline, params, [out, qkv.handle, a.cos.handle, a.sin.handle, a.keys.handle, a.values.handle, ...extraBuffers], grid1d(total, 1));
  return out;
}
