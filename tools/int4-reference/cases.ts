// The 4-bit fixture cases (test/fixtures/int4) and how each is written: formats x group sizes 32/64/128 x sym/asym x
// act-order, odd N where the format allows it (compressed-tensors; GPTQ and AWQ pack N by 8).
import type { TensorSource } from '../../src/formats/safetensors-writer.js';
import {
  awqDequantize,
  codesDequantize,
  compressedDequantize,
  gptqDequantize,
  packAwq,
  packCompressed,
  packGptq,
  randomCodes,
  type Int4Codes,
} from './int4_reference.js';

export interface Int4FixtureCase {
  readonly name: string;
  readonly method: 'gptq' | 'awq' | 'compressed-tensors';
  readonly n: number;
  readonly k: number;
  readonly groupSize: number;
  readonly symmetric: boolean;
  readonly actOrder?: boolean;
  /** GPTQ checkpoint_format 'gptq' (zeros stored minus one). */
  readonly v1?: boolean;
  readonly scaleDtype?: 'float16' | 'bfloat16';
  readonly seed: number;
}

export const INT4_FIXTURE_CASES: readonly Int4FixtureCase[] = [
  { name: 'gptq-g32-sym-v1', method: 'gptq', n: 16, k: 64, groupSize: 32, symmetric: true, v1: true, seed: 1 },
  { name: 'gptq-g64-asym-v1-actorder', method: 'gptq', n: 24, k: 128, groupSize: 64, symmetric: false, v1: true, actOrder: true, seed: 2 },
  { name: 'gptq-g128-asym-v2-actorder', method: 'gptq', n: 8, k: 256, groupSize: 128, symmetric: false, actOrder: true, seed: 3 },
  { name: 'gptq-g128-sym-v2', method: 'gptq', n: 40, k: 128, groupSize: 128, symmetric: true, seed: 4 },
  { name: 'awq-g32', method: 'awq', n: 16, k: 64, groupSize: 32, symmetric: false, seed: 5 },
  { name: 'awq-g64', method: 'awq', n: 24, k: 128, groupSize: 64, symmetric: false, seed: 6 },
  { name: 'awq-g128', method: 'awq', n: 8, k: 256, groupSize: 128, symmetric: false, seed: 7 },
  { name: 'ct-g32-sym-oddn', method: 'compressed-tensors', n: 13, k: 64, groupSize: 32, symmetric: true, seed: 8 },
  { name: 'ct-g64-asym-oddn', method: 'compressed-tensors', n: 7, k: 128, groupSize: 64, symmetric: false, scaleDtype: 'bfloat16', seed: 9 },
  { name: 'ct-g128-sym-actorder', method: 'compressed-tensors', n: 9, k: 256, groupSize: 128, symmetric: true, actOrder: true, seed: 10 },
];

/** quantization_config as each format's checkpoints carry it. */
export function int4QuantizationConfig(c: Pick<Int4FixtureCase, 'method' | 'groupSize' | 'symmetric' | 'actOrder' | 'v1'>): Record<string, unknown> {
  if (c.method === 'gptq') {
    return {
      quant_method: 'gptq',
      bits: 4,
      group_size: c.groupSize,
      desc_act: !!c.actOrder,
      sym: c.symmetric,
      checkpoint_format: c.v1 ? 'gptq' : 'gptq_v2',
      damp_percent: 0.01,
      true_sequential: true,
    };
  }
  if (c.method === 'awq') return { quant_method: 'awq', bits: 4, group_size: c.groupSize, zero_point: true, version: 'gemm' };
  return {
    quant_method: 'compressed-tensors',
    format: 'pack-quantized',
    quantization_status: 'compressed',
    ignore: ['lm_head'],
    config_groups: {
      group_0: {
        targets: ['Linear'],
        input_activations: null,
        output_activations: null,
        weights: {
          num_bits: 4,
          type: 'int',
          symmetric: c.symmetric,
          strategy: 'group',
          group_size: c.groupSize,
          dynamic: false,
          actorder: c.actOrder ? 'group' : null,
          observer: 'minmax',
        },
      },
    },
  };
}

function ints(a: Int32Array, shape: number[]): TensorSource {
  return { dtype: 'int32', shape, bytes: () => new Uint8Array(a.buffer.slice(a.byteOffset, a.byteOffset + a.byteLength)) };
}

/** float16 / bfloat16 bits of values exact in both (8 mantissa bits, normal exponents). */
export function halfBits(v: Float64Array, dtype: 'float16' | 'bfloat16'): Uint8Array {
  const out = new Uint16Array(v.length);
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  for (let i = 0; i < v.length; i++) {
    f[0] = v[i];
    const bits = u[0];
    if (dtype === 'bfloat16') out[i] = bits >>> 16;
    else {
      const sign = (bits >>> 31) << 15;
      const exp = ((bits >>> 23) & 255) - 127 + 15;
      out[i] = sign | (exp << 10) | ((bits >>> 13) & 1023);
    }
  }
  return new Uint8Array(out.buffer);
}

function floats(v: Float64Array, shape: number[], dtype: 'float16' | 'bfloat16'): TensorSource {
  return { dtype, shape, bytes: () => halfBits(v, dtype) };
}

/** The tensors of one layer `${prefix}` in the case's format, and the port's dequantized weight. */
export function int4LayerTensors(
  c: Omit<Int4FixtureCase, 'name' | 'seed'>,
  codes: Int4Codes,
  prefix: string,
): { tensors: [string, TensorSource][]; weight: Float64Array } {
  const { n, k, groupSize } = c;
  const groups = k / groupSize;
  const dt = c.scaleDtype ?? 'float16';
  if (c.method === 'gptq') {
    const t = packGptq(codes, !!c.v1);
    return {
      tensors: [
        [`${prefix}.qweight`, ints(t.qweight, [k / 8, n])],
        [`${prefix}.qzeros`, ints(t.qzeros, [groups, Math.ceil(n / 8)])],
        [`${prefix}.scales`, floats(t.scales, [groups, n], dt)],
        [`${prefix}.g_idx`, ints(t.gIdx!, [k])],
      ],
      weight: gptqDequantize(t, n, k, groupSize, !!c.v1),
    };
  }
  if (c.method === 'awq') {
    const t = packAwq(codes);
    return {
      tensors: [
        [`${prefix}.qweight`, ints(t.qweight, [k, n / 8])],
        [`${prefix}.qzeros`, ints(t.qzeros, [groups, n / 8])],
        [`${prefix}.scales`, floats(t.scales, [groups, n], dt)],
      ],
      weight: awqDequantize(t, n, k, groupSize),
    };
  }
  const t = packCompressed(codes, c.symmetric);
  const tensors: [string, TensorSource][] = [
    [`${prefix}.weight_packed`, ints(t.weightPacked, [n, k / 8])],
    [`${prefix}.weight_scale`, floats(t.weightScale, [n, groups], dt)],
    [`${prefix}.weight_shape`, ints(Int32Array.from([n, k]), [2])],
  ];
  if (t.weightZeroPoint) tensors.push([`${prefix}.weight_zero_point`, ints(t.weightZeroPoint, [Math.ceil(n / 8), groups])]);
  if (t.gIdx) tensors.push([`${prefix}.weight_g_idx`, ints(t.gIdx, [k])]);
  return { tensors, weight: compressedDequantize(t, n, k, groupSize) };
}

/** Random codes for a case: v1 asymmetric zeros are 1..16 (stored 0..15), others 0..15, symmetric 8. */
export function caseCodes(c: Omit<Int4FixtureCase, 'name'>): Int4Codes {
  const codes = randomCodes(c.n, c.k, c.groupSize, { seed: c.seed, symmetric: c.symmetric, actOrder: c.actOrder });
  if (c.v1 && !c.symmetric) for (let i = 0; i < codes.zeros.length; i++) codes.zeros[i] += 1;
  return codes;
}

export function int4FixtureTensors(c: Int4FixtureCase): { tensors: [string, TensorSource][]; config: Record<string, unknown> } {
  const codes = caseCodes(c);
  const { tensors, weight } = int4LayerTensors(c, codes, 'layer');
  // The port agrees with the codes' own meaning (a check of the packers, not of the reader).
  const direct = codesDequantize(codes);
  if (!direct.every((v, i) => v === weight[i])) throw new Error(`${c.name}: port and codes disagree`);
  const expected = Float32Array.from(weight);
  tensors.push(['expected', { dtype: 'float32', shape: [c.n, c.k], bytes: () => new Uint8Array(expected.buffer) }]);
  return { tensors, config: { quantization_config: int4QuantizationConfig(c) } };
}

/**
 * The group scales (`.scales` / `.weight_scale`, float16 or bfloat16) of these tensors divided by 16, exactly: the
 * exponent minus 4 (normal numbers far from underflow). The end-to-end tests pair them with float copies whose
 * weights are the port's divided by 16, which keeps a random model's activations moderate.
 */
export async function divideScalesBy16(tensors: [string, TensorSource][]): Promise<void> {
  for (const entry of tensors) {
    if (!/\.(scales|weight_scale)$/.test(entry[0])) continue;
    const s = entry[1];
    const bytes = await s.bytes();
    const half = new Uint16Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
    const shift = (s.dtype as string) === 'bfloat16' ? 7 : 10;
    for (let i = 0; i < half.length; i++) half[i] -= 4 << shift;
    entry[1] = { ...s, bytes: () => new Uint8Array(half.buffer) };
  }
}
