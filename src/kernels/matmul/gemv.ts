// Launcher of the decode GEMV (gemv.wgsl), used by matmul and scaledMm when M <= 4 and the weight is a [N, K]
// matrix with K contiguous and 16-byte aligned rows; other shapes take the tiled GEMM.
import { DTYPE_INFO, isFp8, lanesPerWord, type DType } from '../../core/dtype.js';
import type { MatmulDims } from '../../runtime/backend.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import { viaFloat32, type GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import {
  activationColumnWgsl,
  epilogueWgsl,
  INT4_PARAMS,
  int4Params,
  SCALING_INPUTS,
  SCALING_VARIANT,
  scalingBuffers,
  scalingVariant,
  weightBytes,
  type GemmScaling,
} from './gemm.js';
import { bytesOf, defineKernel, type VariantOf } from '../../runtime/webgpu/kernels/kernel.js';
import { decodeFn, fillTemplate, grid1d } from '../../runtime/webgpu/kernels/wgsl.js';
import { batchInvariant } from '../../core/batch-invariance.js';

export const GEMV_MAX_M = 4;
/**
 * Rows the grouped form takes (batch-invariant mode, core/batch-invariance.ts): groups of 4 rows along the grid's z,
 * every group running the 4-row shader with a runtime row count, so each row's sum is the same whatever the batch.
 */
export const GEMV_GROUPED_MAX_M = 64;
/** vectorActivations off: the scalar activation loads everywhere (the bench's baseline row). */
export const gemvTuning = { vectorActivations: true };

/** Invocations a workgroup: TPO per output column times OPW columns. */
const WORKGROUP = 256;

/**
 * Invocations per output column: enough to give each about two 16-byte chunks of a row, between 16 (the tail of a
 * row is one element per invocation, and an FP8 chunk holds 16) and 64. Short rows (K = 128..512) then fill a
 * workgroup with more columns instead of leaving invocations idle; that also cuts the workgroup count, which is what
 * a software adapter pays for.
 */
function threadsPerOutput(chunks: number): number {
  let t = 16;
  while (t < 64 && t * 2 <= chunks) t *= 2;
  return t;
}

/** True when gemvKernel can run this product (otherwise use the GEMM). */
export function gemvApplies(b: GpuOperand, dims: MatmulDims): boolean {
  if (dims.batch.length > 0 || dims.m > (batchInvariant() ? GEMV_GROUPED_MAX_M : GEMV_MAX_M) || dims.m === 0) return false;
  const item = DTYPE_INFO[b.dtype].itemBytes;
  const [sk, sn] = b.view.strides;
  return (sk === 1 || dims.k === 1) && (sn * item) % 16 === 0 && (b.view.offset * item) % 16 === 0;
}

/**
 * A packed 4-bit chunk: 32 codes of one group (group sizes are multiples of 32), so its zero and scale are read once
 * and the scale multiplies the chunk's sum instead of each weight; (code - zero) is an exact small integer.
 */
const INT4_CHUNK_BODY = [
  '      let gi = n * p.q_groups + k0 / p.group;',
  '      let z = load_q_zero(p.q_z_off + gi);',
  '      for (var w = 0u; w < 4u; w++) {',
  '        let word = chunk[w];',
  '        for (var l = 0u; l < 8u; l++) {',
  '          part += (f32((word >> (l * 4u)) & 15u) - z) * a_vec(k0 + w * 8u + l);',
  '        }',
  '      }',
  '      part *= load_q_scale(p.q_s_off + gi);',
].join('\n');

/**
 * The int4 chunk with float32 activations read as vec4s (the avec variant): each word's 8 codes become two vec4s
 * dotted with 4-column activation chunks, m vec4 loads per 8 weights instead of 8 m scalar loads.
 */
const INT4_CHUNK_BODY_AVEC = [
  '      let gi = n * p.q_groups + k0 / p.group;',
  '      let z = load_q_zero(p.q_z_off + gi);',
  '      for (var w = 0u; w < 4u; w++) {',
  '        let word = chunk[w];',
  '        let lo = vec4<f32>(f32(word & 15u), f32((word >> 4u) & 15u), f32((word >> 8u) & 15u), f32((word >> 12u) & 15u)) - z;',
  '        let hi = vec4<f32>(f32((word >> 16u) & 15u), f32((word >> 20u) & 15u), f32((word >> 24u) & 15u), f32(word >> 28u)) - z;',
  '        let q = k0 / 4u + w * 2u;',
  '        part += a_dot(lo, q) + a_dot(hi, q + 1u);',
  '      }',
  '      part *= load_q_scale(p.q_s_off + gi);',
].join('\n');

// A loop, not an unrolled block: 16 inlined FP8 decodes per chunk made SwiftShader's shader compiler hang, and GPU
// compilers unroll constant-trip loops themselves.
function chunkBody(dtype: DType): string {
  const lanes = lanesPerWord(dtype);
  const bits = 32 / lanes;
  const code = lanes === 1 ? 'word' : `(word >> (l * ${bits}u)) & ${(2 ** bits - 1) >>> 0}u`;
  return [
    '      for (var w = 0u; w < 4u; w++) {',
    '        let word = chunk[w];',
    `        for (var l = 0u; l < ${lanes}u; l++) {`,
    `          part += decode_w(${code}) * a_vec(k0 + w * ${lanes}u + l);`,
    '        }',
    '      }',
  ].join('\n');
}

/**
 * The avec variant's chunk: 4 weights at a time decoded into a vec4 and dotted with each row's 16-byte activation
 * chunk (a_dot), instead of one strided, decoded scalar load per weight and row (a_vec).
 */
function chunkBodyAvec(dtype: DType): string {
  const lanes = lanesPerWord(dtype);
  const bits = 32 / lanes;
  const mask = `${(2 ** bits - 1) >>> 0}u`;
  // Static lane shifts: a shader compiler keeps wv in registers (a runtime component index may spill it).
  const lane = (word: string, l: number) => (lanes === 1 ? word : l === lanes - 1 ? `(${word} >> ${l * bits}u)` : `((${word} >> ${l * bits}u) & ${mask})`);
  const vec = (codes: string[]) => `vec4<f32>(${codes.map((c) => `decode_w(${c})`).join(', ')})`;
  if (lanes === 1) return `      part += a_dot(${vec(['chunk.x', 'chunk.y', 'chunk.z', 'chunk.w'])}, k0 / 4u);`;
  if (lanes === 2) {
    return [
      `      part += a_dot(${vec([lane('chunk.x', 0), lane('chunk.x', 1), lane('chunk.y', 0), lane('chunk.y', 1)])}, k0 / 4u);`,
      `      part += a_dot(${vec([lane('chunk.z', 0), lane('chunk.z', 1), lane('chunk.w', 0), lane('chunk.w', 1)])}, k0 / 4u + 1u);`,
    ].join('\n');
  }
  // 8-bit codes: one word is one vec4 (a loop over the words, as chunkBody: 16 inlined decodes hung SwiftShader).
  return [
    '      for (var w = 0u; w < 4u; w++) {',
    '        let word = chunk[w];',
    `        part += a_dot(${vec([0, 1, 2, 3].map((l) => lane('word', l)))}, k0 / 4u + w);`,
    '      }',
  ].join('\n');
}

/**
 * WGSL summing the TPO partials `acc` of each output column into red[column * TPO]; `zero` is acc's zero value.
 * With subgroups (which hold consecutive invocations: checked at device start, see subgroupLayoutIsLinear), each of
 * the TPO / sg_size subgroups of a column adds its lanes in registers and one barrier is left instead of log2(TPO).
 */
export function columnReduceWgsl(subgroups: boolean, zero: string): string {
  if (!subgroups) {
    return `  red[lid.x] = acc;
  workgroupBarrier();
  for (var s = TPO / 2u; s > 0u; s >>= 1u) {
    if (t < s) {
      red[lid.x] += red[lid.x + s];
    }
    workgroupBarrier();
  }`;
  }
  return `  let sg_total = subgroupAdd(acc);
  if (sg_lane == 0u) {
    red[lid.x] = sg_total;
  }
  workgroupBarrier();
  if (t == 0u) {
    var s = ${zero};
    for (var j = 0u; j < TPO; j += sg_size) {
      s += red[lid.x + j];
    }
    red[lid.x] = s;
  }
  workgroupBarrier();`;
}

/**
 * With SwiGLU the gate sums are kept per column and the workgroup runs the up rows (n + up_rows) through the same
 * reduction; the stored value is then silu(gate) * up.
 */
const SECOND_ROW = `  if (t == 0u) {
    gate_red[g] = red[lid.x];
  }
  workgroupBarrier();
  {
  acc = vec4<f32>(0.0);
  if (n < p.n) {
    acc = row_partial(n + p.up_rows, t);
  }
{{REDUCE}}
  }`;

/** A column's stored value: its sum, or with SwiGLU silu(gate) * up (a NaN gate passes through, as swiglu does). */
function columnValueFn(swiglu: boolean, opw: number): string {
  if (!swiglu) return 'fn column_value(g: u32, r: u32) -> f32 {\n  return red[g * TPO][r];\n}\n';
  return [
    `var<workgroup> gate_red: array<vec4<f32>, ${opw}>;`,
    'fn column_value(g: u32, r: u32) -> f32 {',
    '  let a = gate_red[g][r];',
    '  let ea = select(exp(-a), a, is_nan(a));',
    '  return a / (1.0 + ea) * red[g * TPO][r];',
    '}',
    '',
  ].join('\n');
}

/** Stores rows 0..m-1 of the workgroup's columns; grouped, as rows row0 + r, those below p.m only. */
function storeCode(lanes: number, m: number, opw: number, grouped: boolean): string {
  const lines: string[] = [];
  for (let r = 0; r < m; r++) {
    const row = grouped ? `(row0 + ${r}u)` : `${r}u`;
    if (grouped) lines.push(`    if (row0 + ${r}u < p.m) {`);
    if (lanes === 1) {
      lines.push(`    for (var g = 0u; g < ${opw}u; g++) {`);
      lines.push(`      if (n0 + g < p.n) {`);
      lines.push(`        out[${row} * p.n + n0 + g] = encode_out(epilogue(${row}, n0 + g, column_value(g, ${r}u)));`);
      lines.push('      }');
      lines.push('    }');
      if (grouped) lines.push('    }');
      continue;
    }
    // n is a multiple of lanes here: each word holds `lanes` whole columns of one row.
    lines.push(`    for (var w = 0u; w < ${opw / lanes}u; w++) {`);
    lines.push(`      let nw = n0 + w * ${lanes}u;`);
    lines.push('      if (nw < p.n) {');
    lines.push('        var word = 0u;');
    lines.push(`        for (var l = 0u; l < ${lanes}u; l++) {`);
    lines.push(`          word |= encode_out(epilogue(${row}, nw + l, column_value(w * ${lanes}u + l, ${r}u))) << (l * ${32 / lanes}u);`);
    lines.push('        }');
    lines.push(`        out[(${row} * p.n + nw) / ${lanes}u] = word;`);
    lines.push('      }');
    lines.push('    }');
    if (grouped) lines.push('    }');
  }
  return lines.join('\n');
}

const GEMV_VARIANT = {
  tpo: 'number',
  m: 'number',
  grouped: 'boolean',
  a: 'dtype',
  b: 'dtype',
  out: 'dtype',
  ...SCALING_VARIANT,
  subgroups: 'boolean',
  swiglu: 'boolean',
  avec: 'boolean',
} as const;
type GemvVariant = VariantOf<typeof GEMV_VARIANT>;

/** Weight elements in a 16-byte chunk (32 for packed 4-bit words). */
const perChunk = (v: GemvVariant) => (v.int4 !== 'none' ? 32 : 16 / DTYPE_INFO[v.b].itemBytes);
const blockScaled = (v: GemvVariant) => v.scaleA === 'block' || v.scaleB === 'block';

function gemvFunctions(v: GemvVariant): string {
  const { m, scaleA: ra, scaleB: rb } = v;
  // FP8 codes decode through a 256-entry table in workgroup memory (filled with the exact decoder): one load
  // instead of a dozen integer ops per weight, and per activation too when it has the same format.
  const lut = isFp8(v.b);
  const lutA = lut && v.a === v.b;
  // Grouped: row r of the group is activation row row0 + r, read only below p.m (the others are zeros).
  const row = (r: number) => (v.grouped ? `(row0 + ${r}u)` : `${r}u`);
  const kc = v.perm ? 'a_col(k)' : 'k';
  const loadA = (r: number) =>
    lutA ? `fp8_lut[code_x(p.a_off + ${row(r)} * p.a_sm + ${kc} * p.a_sk)]` : `load_x(p.a_off + ${row(r)} * p.a_sm + ${kc} * p.a_sk)`;
  const rows = [0, 1, 2, 3].map((r) => (r >= m ? '0.0' : v.grouped ? `a_row(${r}u, k)` : loadA(r)));
  const aScale = (r: number) => (ra === 'block' && r < m ? `scale_a[${row(r)} * p.k_blocks + k / 128u]` : ra === 'block' ? '0.0' : '1.0');
  const aRow = v.grouped
    ? `var<private> row0: u32;\nfn a_row(r: u32, k: u32) -> f32 {\n  if (row0 + r >= p.m) {\n    return 0.0;\n  }\n  return ${loadA(0).replace('(row0 + 0u)', '(row0 + r)')};\n}\n`
    : '';
  const bScale = rb === 'block' ? 'scale_b[(n / 128u) * p.k_blocks + k / 128u]' : '1.0';
  return [
    aRow,
    lut ? 'var<workgroup> fp8_lut: array<f32, 256>;\nfn decode_w(code: u32) -> f32 {\n  return fp8_lut[code];\n}\n' : decodeFn('decode_w', v.b, 'f32'),
    `fn a_vec(k: u32) -> vec4<f32> {\n  return vec4<f32>(${rows.join(', ')});\n}\n`,
    v.avec ? aDotFn(m) : '',
    blockScaled(v) ? `fn block_scale(n: u32, k: u32) -> vec4<f32> {\n  return vec4<f32>(${[0, 1, 2, 3].map(aScale).join(', ')}) * ${bScale};\n}\n` : '',
    epilogueWgsl(v),
    activationColumnWgsl(v),
    columnValueFn(v.swiglu, WORKGROUP / v.tpo),
  ].join('\n');
}

/** `a_dot(wv, q)`: wv dotted with 16-byte chunk q of each activation row (rows past m give 0). */
function aDotFn(m: number): string {
  const rows = [0, 1, 2, 3].map((r) => (r < m ? `dot(wv, xv[(p.a_off + ${r}u * p.a_sm) / 4u + q])` : '0.0'));
  return `fn a_dot(wv: vec4<f32>, q: u32) -> vec4<f32> {\n  return vec4<f32>(${rows.join(', ')});\n}\n`;
}

/**
 * Whether the activation can be read as vec4<f32> chunks: float32, k contiguous, every row 16-byte aligned, not the
 * grouped (batch-invariant) form nor act-order int4 (its columns are permuted). The decode steps' activations are
 * float32 rows like this.
 */
export function activationVectorizes(a: GpuOperand, m: number, grouped: boolean, s: GemmScaling): boolean {
  const [sm, sk] = a.view.strides;
  return (
    gemvTuning.vectorActivations && a.dtype === 'float32' && !grouped && !s.int4B?.perm && sk === 1 && a.view.offset % 4 === 0 && (m === 1 || sm % 4 === 0)
  );
}

const gemv = defineKernel({
  name: 'gemv',
  source: 'gemv.wgsl',
  variant: GEMV_VARIANT,
  params: {
    n: 'u32',
    k: 'u32',
    a_off: 'u32',
    a_sm: 'u32',
    a_sk: 'u32',
    b_off_chunks: 'u32', // weight offset in 16-byte chunks
    b_row_chunks: 'u32', // weight row stride in 16-byte chunks
    chunks: 'u32', // whole chunks per row: floor(k / ELEMS_PER_CHUNK)
    k_blocks: 'u32', // ceil(k / 128)
    up_rows: 'u32', // with SwiGLU: the up row of output column n is weight row n + up_rows
    m: 'u32', // grouped: activation rows in all (the z grid runs ceil(m / 4) groups of 4)
    ...INT4_PARAMS,
  },
  outputs: { out: { packed: 'out', saturate: true } },
  // xv: the same activation buffer as vec4<f32> chunks (avec); x stays bound for the row tails.
  inputs: { x: { packed: 'a' }, xv: { type: 'vec4<f32>', when: (v) => v.avec }, w: { type: 'vec4<u32>', packed: 'b' }, ...SCALING_INPUTS },
  grid: 'custom',
  workgroupSize: WORKGROUP,
  enables: (v) => (v.subgroups ? ['subgroups'] : []),
  constants: (v) => ({ TPO: v.tpo, OPW: WORKGROUP / v.tpo, ELEMS_PER_CHUNK: perChunk(v) }),
  functions: gemvFunctions,
  code: (v) => {
    const reduce = columnReduceWgsl(v.subgroups, 'vec4<f32>(0.0)');
    const lut = isFp8(v.b);
    return {
      CHUNK_BODY: v.int4 !== 'none' ? (v.avec ? INT4_CHUNK_BODY_AVEC : INT4_CHUNK_BODY) : v.avec ? chunkBodyAvec(v.b) : chunkBody(v.b),
      CHUNK_SCALE: blockScaled(v) ? ' * block_scale(n, k0)' : '',
      TAIL_SCALE: blockScaled(v) ? ' * block_scale(n, k)' : '',
      STORE: storeCode(lanesPerWord(v.out), v.m, WORKGROUP / v.tpo, v.grouped),
      ROW_GROUP: v.grouped ? '  row0 = wid.z * 4u;' : '',
      SUBGROUP_BUILTINS: v.subgroups ? ', @builtin(subgroup_invocation_id) sg_lane: u32, @builtin(subgroup_size) sg_size: u32' : '',
      REDUCE: reduce,
      SECOND_ROW: v.swiglu ? fillTemplate(SECOND_ROW, { REDUCE: reduce }) : '',
      LUT_FILL: lut ? `  fp8_lut[lid.x] = ${v.b === 'float8_e4m3fn' ? 'e4m3_to_f32' : 'e5m2_to_f32'}(lid.x);\n  workgroupBarrier();` : '',
    };
  },
});

/**
 * [m, k] @ [k, n] (b a transposed [n, k] weight view) for m <= 4 (batch-invariant mode: up to GEMV_GROUPED_MAX_M) -> contiguous [m, n] in outDtype; with
 * s.activation 'swiglu' -> [m, n/2] = silu(columns 0..n/2-1) * (columns n/2..n-1).
 */
export function gemvKernel(ctx: GpuContext, a: GpuOperand, b: GpuOperand, dims: MatmulDims, outDtype: DType, s: GemmScaling = {}): GpuBuffer {
  const swiglu = s.activation === 'swiglu';
  const { m, k } = dims;
  const n = swiglu ? dims.n / 2 : dims.n;
  const lanes = lanesPerWord(outDtype);
  if (lanes > 1 && n % lanes !== 0) {
    return viaFloat32(ctx, [m, n], outDtype, true, () => gemvKernel(ctx, a, b, dims, 'float32', s));
  }
  const out = ctx.alloc(wordBytes(m * n, lanes));
  if (m * n === 0) return out;
  const item = DTYPE_INFO[b.dtype].itemBytes;
  const chunk = s.int4B ? 32 : 16 / item;
  const tpo = threadsPerOutput(Math.floor(k / chunk));
  const subgroups = ctx.subgroupReduce(tpo);
  const [, sn] = b.view.strides;
  // Batch-invariant: every row count runs the same 4-row shader in groups (its rows' sums do not depend on m).
  const grouped = batchInvariant();
  const avec = activationVectorizes(a, m, grouped, s);
  const [gx, gy] = grid1d(Math.ceil(n / (WORKGROUP / tpo)), 1);
  gemv.run(
    ctx,
    { tpo, m: grouped ? GEMV_MAX_M : m, grouped, a: a.dtype, b: b.dtype, out: outDtype, ...scalingVariant(s), subgroups, swiglu, avec },
    {
      n,
      k,
      a_off: a.view.offset,
      a_sm: a.view.strides[0],
      a_sk: a.view.strides[1],
      b_off_chunks: (b.view.offset * item) / 16,
      b_row_chunks: (sn * item) / 16,
      chunks: Math.floor(k / chunk),
      k_blocks: Math.ceil(k / 128),
      up_rows: swiglu ? n : 0,
      m,
      ...int4Params(s, k),
    },
    { out, x: a.buffer, ...(avec ? { xv: a.buffer } : {}), w: b.buffer, ...scalingBuffers(s) },
    {
      workgroups: [gx, gy, grouped ? Math.ceil(m / GEMV_MAX_M) : 1],
      bytes: weightBytes(b.dtype, s, dims.n, k) + bytesOf(a.dtype, m * k) + bytesOf(outDtype, m * n),
    },
  );
  return out;
}
