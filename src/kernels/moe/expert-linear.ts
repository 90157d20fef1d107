// Launcher of the MoE expert-indexed linear layer (expert-linear.wgsl): gate/up of every chosen expert in one
// dispatch (gather), down projection and the weighted sum over a token's experts in one more (combine). The expert
// ids stay on the GPU, so an MoE block costs the same few dispatches whatever the number of experts.
import { DTYPE_INFO, isFp8, lanesPerWord, type DType } from '../../core/dtype.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import { binaryKernel, viaFloat32, type GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { swigluKernel } from '../swiglu/webgpu.js';
import { blockScaleIndex, expertGemmKernel, expertLinearDims, useGroupedExpertGemm } from './expert-gemm.js';
import { columnReduceWgsl } from '../matmul/gemv.js';
import { INT4_PARAMS, int4Params, weightBytes } from '../matmul/gemm.js';
import { bytesOf, defineKernel, type VariantOf } from '../../runtime/webgpu/kernels/kernel.js';
import { decodeFn, grid1d } from '../../runtime/webgpu/kernels/wgsl.js';

export interface ExpertLinearKernelOptions {
  scale?: GpuBuffer;
  /** The scales are laid out for the weight's transpose ([E, ceil(K/128), ceil(N/128)]): see ExpertLinearOptions. */
  scaleTransposed?: boolean;
  /**
   * A packed 4-bit weight (int32 words [E, N, K/8]): contiguous group scales and zero points [E, N, K/g], perm [K];
   * transposed: multiply by the stack's transpose (x [.., N], out [.., K] in stored column order, perm not applied).
   */
  int4?: { scale: GpuOperand; zero: GpuOperand; groupSize: number; perm?: GpuOperand; transposed?: boolean };
  combine?: GpuOperand;
  outDtype: DType;
  /** silu(gate) * up of the weight's gate rows and up rows (gather only): out [T*k, N/2]. */
  activation?: 'swiglu';
  /** Contiguous [T, N] from element 0, added last (combine only). */
  residual?: GpuOperand;
}

/** Invocations per output column. */
const TPO = 64;
/** Output columns a workgroup (TPO * OPW = 256 invocations). */
const OPW = 4;

/**
 * How weight rows are read: 16-byte chunks when every row starts 16-byte aligned (the checkpoint layout for K a
 * multiple of 16 / item size), single words when rows are word aligned, else element by element (odd K, strided K).
 */
type WeightAccess = 'vec4' | 'word' | 'element';

function weightAccess(w: GpuOperand): WeightAccess {
  const item = DTYPE_INFO[w.dtype].itemBytes;
  const [e, n, k] = w.view.shape;
  // A dim of size 1 is never stepped along: its stride does not matter.
  const [se, sn, sk] = w.view.strides.map((s, d) => (w.view.shape[d] === 1 ? 0 : s));
  if (sk !== 0 && sk !== 1) return 'element';
  if (k === 0 || e * n === 0) return 'element';
  const aligned = (bytes: number) => [se, sn, w.view.offset].every((v) => (v * item) % bytes === 0);
  if (aligned(16)) return 'vec4';
  if (aligned(4)) return 'word';
  return 'element';
}

// Loops, not unrolled blocks: 16 inlined FP8 decodes per chunk made SwiftShader's shader compiler hang (see gemv.ts).
function dotCode(access: WeightAccess, dtype: DType, scaled: boolean): string {
  const scale = (k: string) => (scaled ? ` * block_scale(e, n, ${k})` : '');
  if (access === 'element') {
    return [
      '  let row = p.w_off + e * p.w_se + n * p.w_sn;',
      '  for (var k = t; k < p.k; k += TPO) {',
      `    acc += load_w(row + k * p.w_sk) * load_x(xrow + k * p.x_s1)${scale('k')};`,
      '  }',
    ].join('\n');
  }
  const lanes = lanesPerWord(dtype);
  const bits = 32 / lanes;
  const words = access === 'vec4' ? 4 : 1;
  const perUnit = words * lanes;
  const code = lanes === 1 ? 'word' : `(word >> (l * ${bits}u)) & ${(2 ** bits - 1) >>> 0}u`;
  return [
    '  let row = p.w_off + e * p.w_se + n * p.w_sn;',
    '  for (var c = t; c < p.chunks; c += TPO) {',
    '    let unit = w[row + c];',
    `    let k0 = c * ${perUnit}u;`,
    '    var part = 0.0;',
    `    for (var i = 0u; i < ${words}u; i++) {`,
    `      let word = ${access === 'vec4' ? 'unit[i]' : 'unit'};`,
    `      for (var l = 0u; l < ${lanes}u; l++) {`,
    `        part += decode_w(${code}) * load_x(xrow + (k0 + i * ${lanes}u + l) * p.x_s1);`,
    '      }',
    '    }',
    `    acc += part${scale('k0')};`,
    '  }',
    // The last k % perUnit elements of a row (a K-narrowed view), one per invocation.
    `  let k = p.chunks * ${perUnit}u + t;`,
    '  if (k < p.k) {',
    `    acc += load_w((row * ${perUnit}u) + k) * load_x(xrow + k * p.x_s1)${scale('k')};`,
    '  }',
  ].join('\n');
}

/**
 * A packed 4-bit weight, read as 16-byte chunks (32 codes; a word when rows are only word aligned): a chunk lies in
 * one group (group sizes are multiples of 32), so its zero and scale are read once and the scale multiplies the
 * chunk's sum; (code - zero) is an exact small integer. K is a multiple of 32: no tail.
 */
function int4DotCode(access: WeightAccess): string {
  const words = access === 'vec4' ? 4 : 1;
  return [
    '  let row = p.w_off + e * p.w_se + n * p.w_sn;',
    '  let groups = (e * p.w_rows + n) * p.q_groups;',
    '  for (var c = t; c < p.chunks; c += TPO) {',
    '    let unit = w[row + c];',
    `    let k0 = c * ${words * 8}u;`,
    '    let gi = groups + k0 / p.group;',
    '    let z = load_q_zero(p.q_z_off + gi);',
    '    var part = 0.0;',
    `    for (var i = 0u; i < ${words}u; i++) {`,
    `      let word = ${access === 'vec4' ? 'unit[i]' : 'unit'};`,
    '      for (var l = 0u; l < 8u; l++) {',
    '        part += (f32((word >> (l * 4u)) & 15u) - z) * load_x(xrow + a_col(k0 + i * 8u + l) * p.x_s1);',
    '      }',
    '    }',
    '    acc += part * load_q_scale(p.q_s_off + gi);',
    '  }',
  ].join('\n');
}

/**
 * x_row . column n of W[e] for a packed 4-bit stack (its transpose's row n): stored row k's code n, one word a row
 * (a backward's dx: rows strided by the stored row length, read once each).
 */
function int4TransposedDotCode(): string {
  return [
    '  for (var k = t; k < p.k; k += TPO) {',
    '    let word = w[p.w_off + e * p.w_se + k * p.w_sn + n / 8u];',
    '    let gi = (e * p.k + k) * p.q_groups + n / p.group;',
    '    let value = (f32((word >> ((n % 8u) * 4u)) & 15u) - load_q_zero(p.q_z_off + gi)) * load_q_scale(p.q_s_off + gi);',
    '    acc += value * load_x(xrow + k * p.x_s1);',
    '  }',
  ].join('\n');
}

/** `fn load_w(e: u32) -> f32`: weight element e (an element index) from the array of load units (u32 words unless vec4). */
function loadWeightFn(access: WeightAccess, dtype: DType): string {
  const lanes = lanesPerWord(dtype);
  const bits = 32 / lanes;
  const word = access === 'vec4' ? 'w[wi >> 2u][wi & 3u]' : 'w[wi]';
  const code = lanes === 1 ? word : `(${word} >> ((e & ${lanes - 1}u) * ${bits}u)) & ${(2 ** bits - 1) >>> 0}u`;
  return `fn load_w(e: u32) -> f32 {\n  let wi = e >> ${Math.log2(lanes)}u;\n  return decode_w(${code});\n}\n`;
}

const GATHER_SWIGLU = `    let token = orow / p.slots;
    let e = ids[p.ids_off + token * p.ids_s0 + (orow % p.slots) * p.ids_s1];
    if (e < p.experts) {
      let xrow = p.x_off + select(token, orow, p.x_per_slot != 0u) * p.x_s0;
      acc = vec2<f32>(partial_dot(e, n, xrow, t), partial_dot(e, n + p.n, xrow, t));
    }`;

/** silu(gate) * up exactly as swiglu.wgsl computes it, so the fused output equals swiglu of the plain one. */
const SWIGLU_FN = `fn finish(v: vec2<f32>, row: u32, col: u32) -> f32 {
  let a = v.x;
  let ea = select(exp(-a), a, is_nan(a));
  return a / (1.0 + ea) * v.y;
}
`;

const GATHER = `    let token = orow / p.slots;
    let e = ids[p.ids_off + token * p.ids_s0 + (orow % p.slots) * p.ids_s1];
    if (e < p.experts) {
      acc = partial_dot(e, n, p.x_off + select(token, orow, p.x_per_slot != 0u) * p.x_s0, t);
    }`;

// A token's slots add up in each invocation's partial sum; the column is reduced once, after the last slot.
const COMBINE = `    for (var j = 0u; j < p.slots; j++) {
      let e = ids[p.ids_off + orow * p.ids_s0 + j * p.ids_s1];
      if (e < p.experts) {
        let cw = bitcast<f32>(comb[p.c_off + orow * p.c_s0 + j * p.c_s1]);
        acc += cw * partial_dot(e, n, p.x_off + select(orow, orow * p.slots + j, p.x_per_slot != 0u) * p.x_s0, t);
      }
    }`;

function storeCode(lanes: number): string {
  if (lanes === 1) {
    return `    for (var g = 0u; g < OPW; g++) {
      if (n0 + g < p.n) {
        out[orow * p.n + n0 + g] = encode_out(finish(red[g * TPO], orow, n0 + g));
      }
    }`;
  }
  // n is a multiple of lanes here: a word holds whole columns of one row.
  return `    for (var w = 0u; w < ${OPW / lanes}u; w++) {
      let nw = n0 + w * ${lanes}u;
      if (nw < p.n) {
        var word = 0u;
        for (var l = 0u; l < ${lanes}u; l++) {
          word |= encode_out(finish(red[(w * ${lanes}u + l) * TPO], orow, nw + l)) << (l * ${32 / lanes}u);
        }
        out[(orow * p.n + nw) / ${lanes}u] = word;
      }
    }`;
}

const EXPERT_LINEAR_VARIANT = {
  access: ['vec4', 'word', 'element'],
  x: 'dtype',
  w: 'dtype',
  out: 'dtype',
  combine: 'boolean',
  scaled: 'boolean',
  /** The block scales belong to the weight's transpose. */
  scaleT: 'boolean',
  subgroups: 'boolean',
  activation: ['linear', 'swiglu'],
  residual: 'string',
  /** A packed 4-bit weight: its scales' dtype, else 'none'. */
  int4: 'string',
  /** Multiply by the packed stack's transpose (ExpertLinearKernelOptions int4.transposed). */
  int4T: 'boolean',
  perm: 'boolean',
} as const;
type ExpertLinearVariant = VariantOf<typeof EXPERT_LINEAR_VARIANT>;

function expertLinearFunctions(v: ExpertLinearVariant): string {
  const lut = isFp8(v.w);
  // The column accumulator: a gate and an up sum with SwiGLU, else one sum.
  const acc = `alias Acc = ${v.activation === 'swiglu' ? 'vec2<f32>' : 'f32'};\n`;
  const finish =
    v.activation === 'swiglu'
      ? SWIGLU_FN
      : `fn finish(v: f32, row: u32, col: u32) -> f32 {\n  return v${v.residual !== 'no-residual' ? ' + load_res(row * p.n + col)' : ''};\n}\n`;
  const int4 = v.int4 !== 'none';
  return [
    acc,
    // FP8 codes decode through a 256-entry table in workgroup memory, filled with the exact decoder.
    int4
      ? ''
      : lut
        ? 'var<workgroup> fp8_lut: array<f32, 256>;\nfn decode_w(code: u32) -> f32 {\n  return fp8_lut[code];\n}\n'
        : decodeFn('decode_w', v.w, 'f32'),
    int4 ? '' : loadWeightFn(v.access, v.w),
    // Act-order: stored column k multiplies activation column perm[k].
    int4 ? `fn a_col(k: u32) -> u32 {\n  return ${v.perm ? 'perm[p.perm_off + k]' : 'k'};\n}\n` : '',
    v.scaled ? `fn block_scale(e: u32, n: u32, k: u32) -> f32 {\n  return scale[${blockScaleIndex(v.scaleT)}];\n}\n` : '',
    finish,
  ].join('\n');
}

const expertLinear = defineKernel({
  name: 'expert-linear',
  source: 'expert-linear.wgsl',
  variant: EXPERT_LINEAR_VARIANT,
  params: {
    n: 'u32',
    k: 'u32',
    experts: 'u32',
    slots: 'u32', // k of the top-k: ids is [T, slots]
    rows_out: 'u32', // T * slots (gather) or T (combine)
    col_blocks: 'u32', // ceil(n / OPW)
    x_off: 'u32',
    x_s0: 'u32',
    x_s1: 'u32',
    x_per_slot: 'u32', // x has a row per slot (1) or per token (0)
    // Weight offset, expert and row strides, in load units (16-byte chunks, words or elements).
    w_off: 'u32',
    w_se: 'u32',
    w_sn: 'u32',
    w_sk: 'u32', // element stride along K (element loads only)
    chunks: 'u32', // whole load units per row
    k_blocks: 'u32', // ceil(k / 128)
    n_blocks: 'u32', // ceil(n / 128)
    ids_off: 'u32',
    ids_s0: 'u32',
    ids_s1: 'u32',
    c_off: 'u32',
    c_s0: 'u32',
    c_s1: 'u32',
    w_rows: 'u32', // the weight's N (twice p.n with SwiGLU)
    ...INT4_PARAMS,
  },
  outputs: { out: { packed: 'out' } },
  inputs: {
    x: { packed: 'x' },
    // Load units of the weight; load_w above decodes single elements from them.
    w: { type: (v) => (v.access === 'vec4' ? 'vec4<u32>' : 'u32') },
    ids: 'u32',
    scale: { type: 'f32', when: (v) => v.scaled },
    comb: { type: 'u32', when: (v) => v.combine },
    res: { packed: (v) => v.residual as DType, when: (v) => v.residual !== 'no-residual' },
    q_scale: { packed: (v) => v.int4 as DType, when: (v) => v.int4 !== 'none' },
    q_zero: { packed: () => 'uint8' as DType, when: (v) => v.int4 !== 'none' },
    perm: { type: 'u32', when: (v) => v.perm },
  },
  grid: 'custom',
  enables: (v) => (v.subgroups ? ['subgroups'] : []),
  constants: () => ({ TPO, OPW }),
  functions: expertLinearFunctions,
  code: (v) => ({
    DOT: v.int4T ? int4TransposedDotCode() : v.int4 !== 'none' ? int4DotCode(v.access) : dotCode(v.access, v.w, v.scaled),
    ACCUMULATE: v.combine ? COMBINE : v.activation === 'swiglu' ? GATHER_SWIGLU : GATHER,
    SUBGROUP_BUILTINS: v.subgroups ? ', @builtin(subgroup_invocation_id) sg_lane: u32, @builtin(subgroup_size) sg_size: u32' : '',
    REDUCE: columnReduceWgsl(v.subgroups, 'Acc()'),
    STORE: storeCode(lanesPerWord(v.out)),
    LUT_FILL: isFp8(v.w) ? `  fp8_lut[lid.x] = ${v.w === 'float8_e4m3fn' ? 'e4m3_to_f32' : 'e5m2_to_f32'}(lid.x);\n  workgroupBarrier();` : '',
  }),
});

/**
 * x [T or T*k, K] . W[ids]^T with weight [E, N, K] and ids int32 [T, k] -> contiguous [T*k, N], or [T, N] summed
 * over slots with the float32 combine weights [T, k]. scale: contiguous float32 [E, ceil(N/128), ceil(K/128)] block
 * scales of an FP8 weight. Accumulates in float32.
 */
export function expertLinearKernel(ctx: GpuContext, x: GpuOperand, weight: GpuOperand, ids: GpuOperand, options: ExpertLinearKernelOptions): GpuBuffer {
  const { scale, scaleTransposed, combine, outDtype, activation, residual, int4 } = options;
  const [numExperts, wRows, kStored] = weight.view.shape;
  const transposed = !!int4?.transposed;
  const { n: width, k } = expertLinearDims(weight, int4);
  const [t, slots] = ids.view.shape;
  const rowsOut = combine ? t : t * slots;
  // Prefill-sized batches: sort the slots by expert and run a grouped GEMM (one weight read per 64-slot tile); its
  // epilogues run as the separate ops they stand for.
  if (useGroupedExpertGemm(ctx, weight, ids, combine !== undefined, int4)) {
    const plain = expertGemmKernel(ctx, x, weight, ids, { scale, scaleTransposed, combine, outDtype, int4 });
    if (!activation && !residual) return plain;
    try {
      const view = { shape: [rowsOut, width], strides: [width, 1], offset: 0 };
      const op = { buffer: plain, dtype: outDtype, view };
      return activation ? swigluKernel(ctx, op) : binaryKernel(ctx, 'add', op, residual!, [rowsOut, width], outDtype);
    } finally {
      ctx.release(plain);
    }
  }
  const n = activation ? width / 2 : width;
  const lanes = lanesPerWord(outDtype);
  if (lanes > 1 && n % lanes !== 0) {
    // Rows would share packed output words between workgroups.
    return viaFloat32(ctx, [rowsOut, n], outDtype, false, () => expertLinearKernel(ctx, x, weight, ids, { ...options, outDtype: 'float32' }));
  }
  const out = ctx.alloc(wordBytes(rowsOut * n, lanes));
  if (rowsOut * n === 0) return out;

  // The transpose reads single words down the stored rows.
  const access = transposed ? 'word' : weightAccess(weight);
  // The op compacts a 4-bit weight: its rows are whole words.
  if (int4 && access === 'element') throw new Error('expertLinearKernel: a packed 4-bit weight must be contiguous');
  const item = DTYPE_INFO[weight.dtype].itemBytes;
  const unitBytes = access === 'vec4' ? 16 : access === 'word' ? 4 : item;
  const perUnit = unitBytes / item;
  const [se, sn, sk] = weight.view.strides.map((s, d) => (weight.view.shape[d] === 1 ? 0 : s));
  const inUnits = (elements: number) => (elements * item) / unitBytes;
  const colBlocks = Math.ceil(n / OPW);
  expertLinear.run(
    ctx,
    {
      access,
      x: x.dtype,
      w: weight.dtype,
      out: outDtype,
      combine: !!combine,
      scaled: scale !== undefined,
      scaleT: scale !== undefined && !!scaleTransposed,
      subgroups: ctx.subgroupReduce(TPO),
      activation: activation ?? 'linear',
      residual: residual?.dtype ?? 'no-residual',
      int4: int4?.scale.dtype ?? 'none',
      int4T: transposed,
      perm: !!int4?.perm && !transposed,
    },
    {
      n,
      k,
      experts: numExperts,
      slots,
      rows_out: rowsOut,
      col_blocks: colBlocks,
      x_off: x.view.offset,
      x_s0: x.view.strides[0],
      x_s1: x.view.strides[1],
      x_per_slot: x.view.shape[0] === t * slots ? 1 : 0,
      w_off: inUnits(weight.view.offset),
      w_se: inUnits(se),
      w_sn: inUnits(sn),
      w_sk: sk,
      chunks: Math.floor(kStored / perUnit),
      k_blocks: Math.ceil(k / 128),
      n_blocks: Math.ceil(wRows / 128),
      ids_off: ids.view.offset,
      ids_s0: ids.view.strides[0],
      ids_s1: ids.view.strides[1],
      c_off: combine?.view.offset ?? 0,
      c_s0: combine?.view.strides[0] ?? 0,
      c_s1: combine?.view.strides[1] ?? 0,
      w_rows: wRows,
      ...int4Params(int4 ? { int4B: int4 } : {}, transposed ? kStored * 8 : k),
    },
    {
      out,
      x: x.buffer,
      w: weight.buffer,
      ids: ids.buffer,
      scale,
      comb: combine?.buffer,
      res: residual?.buffer,
      q_scale: int4?.scale.buffer,
      q_zero: int4?.zero.buffer,
      perm: transposed ? undefined : int4?.perm?.buffer,
    },
    {
      workgroups: grid1d(colBlocks * rowsOut, 1),
      // Every slot reads its expert's rows (slots sharing an expert are counted twice; at decode they cannot).
      bytes:
        t * slots * (int4 ? weightBytes(weight.dtype, { int4B: int4 }, wRows, kStored * 8) : bytesOf(weight.dtype, wRows * k)) +
        bytesOf(x.dtype, x.view.shape[0] * k) +
        bytesOf(outDtype, rowsOut * n) +
        (residual ? bytesOf(residual.dtype, rowsOut * n) : 0),
    },
  );
  return out;
}
