// CPU reference of attentionInputs: the unfused chain it replaces (per-head RMSNorm, RoPE of the first R dims, copy
// into the caches), written out in float64 with the same roundings: the RMSNorm output and the RoPE output are
// stored in qkv's dtype before the next step reads them, as separate rmsNorm / rope / copyInto ops would. An FP8
// cache gets scaled rows (core/kv-fp8.ts).
import type { StorageArray } from '../../core/codecs.js';
import { decodeOne, encodeOne } from '../../core/codecs.js';
import type { DType } from '../../core/dtype.js';
import type { AttentionInputsArgs } from './index.js';
import { castCode } from '../../core/codecs.js';
import { encodeKvRow, isScaledKv } from '../../core/kv-fp8.js';
import { store, values } from '../../runtime/cpu/cpu-backend.js';
import { pagedRowViews } from '../../runtime/cpu/paged-rows.js';

type Handle = StorageArray;

function roundTo(dtype: DType, x: number): number {
  return dtype === 'float32' ? Math.fround(x) : decodeOne(dtype, encodeOne(dtype, x));
}

export function attentionInputsReference(a: AttentionInputsArgs<Handle>): Handle {
  const { heads, kvHeads, headDim: d } = a;
  const x = values(a.qkv);
  const s = a.qkv.view.shape[0];
  const width = (heads + 2 * kvHeads) * d;
  const qn = a.qNorm ? values(a.qNorm) : undefined;
  const kn = a.kNorm ? values(a.kNorm) : undefined;
  const cos = values(a.cos);
  const sin = values(a.sin);
  // Partial rotary: pairs (i, i + half) for i < half = R / 2; dims R.. pass through.
  const half = (a.rotaryDim ?? d) / 2;
  const base = a.position + (a.positionFrom ? values(a.positionFrom)[0] : 0);
  const q = new Float64Array(s * heads * d);
  const dt = a.qkv.dtype;
  const row = new Float64Array(d);
  const paged = a.pages && pagedRowViews(a.pages, s);
  let poolRow = (pos: number) => pos;
  const write = (cache: AttentionInputsArgs<Handle>['keys'], pos: number, h: number, v: Float64Array) => {
    const [o, s0, s1, s2] = [cache.view.offset, ...cache.view.strides];
    const row = poolRow(pos);
    if (isScaledKv(cache.dtype)) return encodeKvRow(v, d, cache.handle as Uint8Array, o + row * s0 + h * s1);
    for (let c = 0; c < d; c++) cache.handle[o + row * s0 + h * s1 + c * s2] = castCode(v[c], cache.dtype);
  };
  for (let si = 0; si < s; si++) {
    const pos = paged ? paged[si].position : base + si;
    if (paged) poolRow = paged[si].poolRow;
    else if (pos >= a.keys.view.shape[0]) continue;
    if (pos >= a.cos.view.shape[0]) continue;
    for (let j = 0; j < heads + 2 * kvHeads; j++) {
      for (let c = 0; c < d; c++) row[c] = x[si * width + j * d + c];
      if (j >= heads + kvHeads) {
        write(a.values, pos, j - heads - kvHeads, row);
        continue;
      }
      const w = j < heads ? qn : kn;
      if (w) {
        let sumSq = 0;
        for (let c = 0; c < d; c++) sumSq += row[c] * row[c];
        const inv = 1 / Math.sqrt(sumSq / d + a.eps);
        for (let c = 0; c < d; c++) row[c] = roundTo(dt, w[c] * roundTo(dt, row[c] * inv));
      }
      const roped = row.slice();
      for (let i = 0; i < half; i++) {
        const [c1, s1] = [cos[pos * half + i], sin[pos * half + i]];
        roped[i] = roundTo(dt, row[i] * c1 - row[i + half] * s1);
        roped[i + half] = roundTo(dt, row[i + half] * c1 + row[i] * s1);
      }
      if (j < heads) q.set(roped, (si * heads + j) * d);
      else write(a.keys, pos, j - heads, roped);
    }
  }
  return store(q, dt);
}
