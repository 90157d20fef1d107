// Float64 ports of the 4-bit checkpoint formats, written from their reference code and independent of src/:
// - GPTQ (auto-gptq QuantLinear.pack / the torch dequantize of transformers' and optimum's GPTQ path): qweight [K/8, N]
//   packs K, nibble j of row r = column 8r + j; qzeros [G, N/8] packs N the same way; scales [G, N]; g_idx [K] picks
//   each column's group. checkpoint_format 'gptq' (v1) stores zero - 1, read back as ((qzeros >> 4j) & 15) + 1.
//   w[n, k] = scales[g_idx[k], n] * (q - zero[g_idx[k], n]).
// - AWQ GEMM (AutoAWQ WQLinear_GEMM.pack, transformers' unpack_awq + reverse_awq_order): qweight [K, N/8] and qzeros
//   [G, N/8] pack N with nibble i holding column 8c + AWQ_ORDER[i]; w[n, k] = (q - z) * scales[k / g, n].
// - compressed-tensors pack-quantized (pack_to_int32 / unpack_from_int32, dequantize): weight_packed [N, K/8] packs K
//   as signed value + 8; weight_zero_point [ceil(N/8), G] packs N (dim 0) the same way; weight_scale [N, G];
//   weight_g_idx [K] optional. w[n, k] = (q_signed - zp_signed) * scale[n, g(k)].
// Also the inverse (packing integer codes into each layout), which builds the fixtures and the tiny checkpoints of
// the tests. Usage: npx tsx tools/int4-reference/make-fixtures.ts
export const AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7];

const nib = (word: number, j: number) => (word >>> (4 * j)) & 15;

export interface GptqTensors {
  qweight: Int32Array; // [K/8, N]
  qzeros: Int32Array; // [G, ceil(N/8)]
  scales: Float64Array; // [G, N]
  gIdx?: Int32Array; // [K]
}

/** The weight [N, K] (row-major) of a GPTQ layer. */
export function gptqDequantize(t: GptqTensors, n: number, k: number, groupSize: number, v1: boolean): Float64Array {
  const zw = Math.ceil(n / 8);
  const out = new Float64Array(n * k);
  for (let kk = 0; kk < k; kk++) {
    const g = t.gIdx ? t.gIdx[kk] : Math.floor(kk / groupSize);
    for (let c = 0; c < n; c++) {
      const q = nib(t.qweight[Math.floor(kk / 8) * n + c], kk % 8);
      const z = nib(t.qzeros[g * zw + Math.floor(c / 8)], c % 8) + (v1 ? 1 : 0);
      out[c * k + kk] = t.scales[g * n + c] * (q - z);
    }
  }
  return out;
}

export interface AwqTensors {
  qweight: Int32Array; // [K, N/8]
  qzeros: Int32Array; // [G, N/8]
  scales: Float64Array; // [G, N]
}

export function awqDequantize(t: AwqTensors, n: number, k: number, groupSize: number): Float64Array {
  const nw = n / 8;
  const out = new Float64Array(n * k);
  for (let kk = 0; kk < k; kk++) {
    const g = Math.floor(kk / groupSize);
    for (let w = 0; w < nw; w++) {
      for (let i = 0; i < 8; i++) {
        const c = 8 * w + AWQ_ORDER[i];
        const q = nib(t.qweight[kk * nw + w], i);
        const z = nib(t.qzeros[g * nw + w], i);
        out[c * k + kk] = (q - z) * t.scales[g * n + c];
      }
    }
  }
  return out;
}

export interface CompressedTensors {
  weightPacked: Int32Array; // [N, ceil(K/8)]
  weightScale: Float64Array; // [N, G]
  weightZeroPoint?: Int32Array; // [ceil(N/8), G]
  gIdx?: Int32Array;
}

export function compressedDequantize(t: CompressedTensors, n: number, k: number, groupSize: number): Float64Array {
  const kw = Math.ceil(k / 8);
  const groups = k / groupSize;
  const out = new Float64Array(n * k);
  for (let r = 0; r < n; r++) {
    for (let kk = 0; kk < k; kk++) {
      const g = t.gIdx ? t.gIdx[kk] : Math.floor(kk / groupSize);
      const q = nib(t.weightPacked[r * kw + Math.floor(kk / 8)], kk % 8) - 8;
      const zp = t.weightZeroPoint ? nib(t.weightZeroPoint[Math.floor(r / 8) * groups + g], r % 8) - 8 : 0;
      out[r * k + kk] = (q - zp) * t.weightScale[r * groups + g];
    }
  }
  return out;
}

// ---- Packing integer codes into each layout (the inverse rules) ----

/** Codes [N, K] in 0..15, zeros [N, G] (the true zero point), scales [N, G]; gIdx [K] when act-order. */
export interface Int4Codes {
  n: number;
  k: number;
  groupSize: number;
  codes: Uint8Array;
  zeros: Uint8Array;
  scales: Float64Array;
  gIdx?: Int32Array;
}

const groupOf = (c: Int4Codes, kk: number) => (c.gIdx ? c.gIdx[kk] : Math.floor(kk / c.groupSize));

export function packGptq(c: Int4Codes, v1: boolean): GptqTensors {
  const { n, k } = c;
  const groups = k / c.groupSize;
  const zw = Math.ceil(n / 8);
  const qweight = new Int32Array((k / 8) * n);
  for (let kk = 0; kk < k; kk++) for (let col = 0; col < n; col++) qweight[Math.floor(kk / 8) * n + col] |= c.codes[col * k + kk] << (4 * (kk % 8));
  const qzeros = new Int32Array(groups * zw);
  const scales = new Float64Array(groups * n);
  for (let g = 0; g < groups; g++) {
    for (let col = 0; col < n; col++) {
      // auto-gptq v1 stores zero - 1 (masked to 4 bits).
      qzeros[g * zw + Math.floor(col / 8)] |= ((c.zeros[col * groups + g] - (v1 ? 1 : 0)) & 15) << (4 * (col % 8));
      scales[g * n + col] = c.scales[col * groups + g];
    }
  }
  return { qweight, qzeros, scales, gIdx: c.gIdx ?? Int32Array.from({ length: k }, (_, i) => Math.floor(i / c.groupSize)) };
}

export function packAwq(c: Int4Codes): AwqTensors {
  const { n, k } = c;
  const groups = k / c.groupSize;
  const nw = n / 8;
  const qweight = new Int32Array(k * nw);
  const qzeros = new Int32Array(groups * nw);
  const scales = new Float64Array(groups * n);
  for (let w = 0; w < nw; w++) {
    for (let i = 0; i < 8; i++) {
      const col = 8 * w + AWQ_ORDER[i];
      for (let kk = 0; kk < k; kk++) qweight[kk * nw + w] |= c.codes[col * k + kk] << (4 * i);
      for (let g = 0; g < groups; g++) qzeros[g * nw + w] |= c.zeros[col * groups + g] << (4 * i);
    }
  }
  for (let g = 0; g < groups; g++) for (let col = 0; col < n; col++) scales[g * n + col] = c.scales[col * groups + g];
  return { qweight, qzeros, scales };
}

/** symmetric: no zero point tensor (the codes' zero must then be 8). */
export function packCompressed(c: Int4Codes, symmetric: boolean): CompressedTensors {
  const { n, k } = c;
  const groups = k / c.groupSize;
  const kw = Math.ceil(k / 8);
  const weightPacked = new Int32Array(n * kw);
  for (let r = 0; r < n; r++) for (let kk = 0; kk < k; kk++) weightPacked[r * kw + Math.floor(kk / 8)] |= c.codes[r * k + kk] << (4 * (kk % 8));
  let weightZeroPoint: Int32Array | undefined;
  if (!symmetric) {
    weightZeroPoint = new Int32Array(Math.ceil(n / 8) * groups);
    for (let r = 0; r < n; r++) for (let g = 0; g < groups; g++) weightZeroPoint[Math.floor(r / 8) * groups + g] |= c.zeros[r * groups + g] << (4 * (r % 8));
  }
  return { weightPacked, weightScale: c.scales.slice(), weightZeroPoint, gIdx: c.gIdx };
}

// ---- Random codes ----

/** A small deterministic generator (mulberry32). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A value exactly representable in float16 and bfloat16 (8 mantissa bits) near 2^-6..2^-3, random sign. */
function exactScale(r: () => number): number {
  const m = Math.floor(r() * 128);
  const e = -6 + Math.floor(r() * 4);
  return (r() < 0.1 ? -1 : 1) * (1 + m / 128) * 2 ** e;
}

/**
 * Random codes, zeros (8 when symmetric; 1..16 and 0..15 otherwise, 16 only where v1's + 1 allows it) and scales; with
 * actOrder a random g_idx with groupSize columns a group.
 */
export function randomCodes(
  n: number,
  k: number,
  groupSize: number,
  opts: { seed: number; symmetric: boolean; actOrder?: boolean; maxZero?: number },
): Int4Codes {
  const r = rng(opts.seed);
  const groups = k / groupSize;
  const codes = Uint8Array.from({ length: n * k }, () => Math.floor(r() * 16));
  const maxZero = opts.maxZero ?? 15;
  const zeros = Uint8Array.from({ length: n * groups }, () => (opts.symmetric ? 8 : Math.floor(r() * (maxZero + 1))));
  const scales = Float64Array.from({ length: n * groups }, () => exactScale(r));
  let gIdx: Int32Array | undefined;
  if (opts.actOrder) {
    const order = Int32Array.from({ length: k }, (_, i) => i);
    for (let i = k - 1; i > 0; i--) {
      const j = Math.floor(r() * (i + 1));
      [order[i], order[j]] = [order[j], order[i]];
    }
    // auto-gptq: g_idx[perm[i]] = i // group_size.
    gIdx = new Int32Array(k);
    for (let i = 0; i < k; i++) gIdx[order[i]] = Math.floor(i / groupSize);
  }
  return { n, k, groupSize, codes, zeros, scales, gIdx };
}

/** The weight the codes mean: w[n, k] = (code - zero) * scale of k's group. */
export function codesDequantize(c: Int4Codes): Float64Array {
  const groups = c.k / c.groupSize;
  const out = new Float64Array(c.n * c.k);
  for (let r = 0; r < c.n; r++) {
    for (let kk = 0; kk < c.k; kk++) {
      const g = r * groups + groupOf(c, kk);
      out[r * c.k + kk] = (c.codes[r * c.k + kk] - c.zeros[g]) * c.scales[g];
    }
  }
  return out;
}
