// Launcher of the tiled GEMM (gemm.wgsl): plain matmul and FP8 scaledMm share it; they differ only in the
// generated load/epilogue functions. The scaling variant, bindings and epilogue are shared with the decode GEMV.
import { lanesPerWord, type DType } from '../../core/dtype.js';
import { ShapeError } from '../../core/errors.js';
import { coalesceViews, formatShape, numel } from '../../core/shape.js';
import { EPILOGUE_UNARY_OPS, type EpilogueUnary, type MatmulDims } from '../../runtime/backend.js';
import { mapExpression } from '../../runtime/webgpu/kernels/map-ops.js';
import { wgslSource } from '../../runtime/webgpu/kernels/wgsl.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import { viaFloat32, type GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { bytesOf, defineKernel, type VariantOf } from '../../runtime/webgpu/kernels/kernel.js';

const TILE = 64;

/** How a scale applies to its operand: one value, one per row of a / column of b, or one per 128-long K block. */
export type ScaleRecipe = 'tensor' | 'row' | 'block';

/** Dequantization scales (float32, contiguous) and epilogue terms of a scaled matmul. */
export interface GemmScaling {
  /** a's scales: tensor [1], row [m], block [m, ceil(k/128)] (1x128 groups). */
  scaleA?: { buffer: GpuBuffer; recipe: ScaleRecipe };
  /** b's scales: tensor [1], row [n], block [ceil(n/128), ceil(k/128)] (128x128 blocks of the [n, k] weight). */
  scaleB?: { buffer: GpuBuffer; recipe: ScaleRecipe };
  /** Added per output column; contiguous [n] of any float dtype. */
  bias?: GpuOperand;
  /** One float32 value multiplied into the result before the output cast (scaledMm's scale_result). */
  scaleResult?: GpuBuffer;
  /** Contiguous [m, n] (from element 0) added last: a residual connection in the epilogue. */
  residual?: GpuOperand;
  /** Decode GEMV only: rows n and n + N/2 of the weight are gate and up, the output [m, N/2] is silu(gate) * up. */
  activation?: 'swiglu';
  /** act(result) before the residual, in float32 with the elementwise op's expression. */
  unary?: EpilogueUnary;
  /**
   * b is a packed 4-bit weight (int32 words, b.view their [k/8, n] transposed view): contiguous scales and zero points
   * [n, k/groupSize], and the act-order column permutation [k] read on the activation side.
   */
  int4B?: { scale: GpuOperand; zero: GpuOperand; groupSize: number; perm?: GpuOperand };
}

function scaleTerm(name: string, recipe: ScaleRecipe | 'none', index: string): string {
  if (recipe === 'none' || recipe === 'block') return '';
  return recipe === 'tensor' ? ` * ${name}[0]` : ` * ${name}[${index}]`;
}

const RECIPES = ['none', 'tensor', 'row', 'block'] as const;

/**
 * Variant fields of a scaled matmul, shared by the GEMM and the decode GEMV: each scale's recipe, and the bias and
 * residual dtypes ('none' when absent).
 */
export const SCALING_VARIANT = {
  scaleA: RECIPES,
  scaleB: RECIPES,
  bias: 'string',
  scaleResult: 'boolean',
  residual: 'string',
  /** A packed 4-bit b: its scales' dtype, else 'none'. */
  int4: 'string',
  perm: 'boolean',
  /** The epilogue's activation (EpilogueUnary), else 'none'. */
  unary: 'string',
} as const;
export type ScalingVariant = VariantOf<typeof SCALING_VARIANT>;

export function scalingVariant(s: GemmScaling): ScalingVariant {
  return {
    scaleA: s.scaleA?.recipe ?? 'none',
    scaleB: s.scaleB?.recipe ?? 'none',
    bias: s.bias?.dtype ?? 'none',
    scaleResult: !!s.scaleResult,
    residual: s.residual?.dtype ?? 'none',
    int4: s.int4B?.scale.dtype ?? 'none',
    perm: !!s.int4B?.perm,
    unary: s.unary ?? 'none',
  };
}

/** The optional inputs of a scaled matmul, bound in this order after the operands. */
export const SCALING_INPUTS = {
  scale_a: { type: 'f32', when: (v: ScalingVariant) => v.scaleA !== 'none' },
  scale_b: { type: 'f32', when: (v: ScalingVariant) => v.scaleB !== 'none' },
  bias: { packed: (v: ScalingVariant) => v.bias as DType, when: (v: ScalingVariant) => v.bias !== 'none' },
  scale_result: { type: 'f32', when: (v: ScalingVariant) => v.scaleResult },
  residual: { packed: (v: ScalingVariant) => v.residual as DType, when: (v: ScalingVariant) => v.residual !== 'none' },
  q_scale: { packed: (v: ScalingVariant) => v.int4 as DType, when: (v: ScalingVariant) => v.int4 !== 'none' },
  q_zero: { packed: () => 'uint8' as DType, when: (v: ScalingVariant) => v.int4 !== 'none' },
  perm: { type: 'u32', when: (v: ScalingVariant) => v.perm },
} as const;

/** Uniform params of a packed 4-bit b, shared by the GEMM and the GEMV. */
export const INT4_PARAMS = { group: 'u32', q_groups: 'u32', q_s_off: 'u32', q_z_off: 'u32', perm_off: 'u32' } as const;

export function int4Params(s: GemmScaling, k: number) {
  const q = s.int4B;
  return {
    group: q?.groupSize ?? 0,
    q_groups: q ? k / q.groupSize : 0,
    q_s_off: q?.scale.view.offset ?? 0,
    q_z_off: q?.zero.view.offset ?? 0,
    perm_off: q?.perm?.view.offset ?? 0,
  };
}

/** `a_col(k)`: the activation column weight column k multiplies (act-order reads it from perm). */
export function activationColumnWgsl(v: ScalingVariant): string {
  return `fn a_col(k: u32) -> u32 {\n  return ${v.perm ? 'perm[p.perm_off + k]' : 'k'};\n}\n`;
}

/** Bytes of b as stored: a packed 4-bit weight is half a byte per element plus its group scales and zeros. */
export function weightBytes(dtype: DType, s: GemmScaling, n: number, k: number): number {
  const q = s.int4B;
  if (!q) return bytesOf(dtype, n * k);
  const groups = (n * k) / q.groupSize;
  return (n * k) / 2 + bytesOf(q.scale.dtype, groups) + groups;
}

/** The buffers of SCALING_INPUTS (those absent left undefined). */
export function scalingBuffers(s: GemmScaling) {
  return {
    scale_a: s.scaleA?.buffer,
    scale_b: s.scaleB?.buffer,
    bias: s.bias?.buffer,
    scale_result: s.scaleResult,
    residual: s.residual?.buffer,
    q_scale: s.int4B?.scale.buffer,
    q_zero: s.int4B?.zero.buffer,
    perm: s.int4B?.perm?.buffer,
  };
}

/**
 * `epilogue(m, n, acc)`: tensor/row scales, bias, result scale and residual (block scales apply on load instead,
 * as they vary along K). The output cast is encode_out, which saturates FP8 as cuBLASLt's scaled GEMMs do rather
 * than overflow to NaN.
 */
export function epilogueWgsl(v: ScalingVariant): string {
  const lines = [
    'fn epilogue(m: u32, n: u32, v: f32) -> f32 {',
    `  var r = v${scaleTerm('scale_a', v.scaleA, 'm')}${scaleTerm('scale_b', v.scaleB, 'n')};`,
    v.bias !== 'none' ? '  r += load_bias(n);' : '',
    v.scaleResult ? '  r *= scale_result[0];' : '',
    v.unary !== 'none' ? '  r = epilogue_unary(r);' : '',
    v.residual !== 'none' ? '  r += load_residual(m * p.n + n);' : '',
    '  return r;',
    '}',
  ];
  return unaryWgsl(v.unary) + lines.filter(Boolean).join('\n') + '\n';
}

/** `epilogue_unary(x)`: the elementwise op's own f32 expression (map-ops.ts) and its helpers, so the bits match. */
function unaryWgsl(op: string): string {
  if (op === 'none') return '';
  if (!(EPILOGUE_UNARY_OPS as readonly string[]).includes(op)) throw new Error(`matmul epilogue: no activation ${op}`);
  const expr = mapExpression(op, 'f32');
  return `${wgslSource('float-math.wgsl')}\nfn epilogue_unary(x: f32) -> f32 {\n  return ${expr};\n}\n`;
}

/** `a_value` / `b_value`: an operand element dequantized; block scales vary along K, so they apply per element here. */
function operandLoads(v: ScalingVariant): string {
  const a = `fn a_value(i: u32, m: u32, k: u32) -> f32 {\n  return load_a(i)${v.scaleA === 'block' ? ' * scale_a[m * p.k_blocks + k / 128u]' : ''};\n}\n`;
  // A packed 4-bit b is addressed by (k, n): word k / 8 of row n, dequantized with its group's scale and zero.
  const b =
    v.int4 !== 'none'
      ? [
          'fn b_value(i: u32, k: u32, n: u32) -> f32 {',
          '  let word = code_b(p.b_off + n * p.b_sn + k / 8u);',
          '  let g = n * p.q_groups + k / p.group;',
          '  return (f32((word >> ((k % 8u) * 4u)) & 15u) - load_q_zero(p.q_z_off + g)) * load_q_scale(p.q_s_off + g);',
          '}',
          '',
        ].join('\n')
      : `fn b_value(i: u32, k: u32, n: u32) -> f32 {\n  return load_b(i)${v.scaleB === 'block' ? ' * scale_b[(n / 128u) * p.k_blocks + k / 128u]' : ''};\n}\n`;
  return a + b + activationColumnWgsl(v);
}

/**
 * WGSL storing 4 columns (c0..c0+3 of output row `row`) of an invocation's register block from the vec4 `acc`:
 * `value(col, acc)` turns a column's accumulator into the stored value. Packed dtypes write whole words (n is a
 * multiple of lanes here).
 */
export function tileStoreCode(lanes: number, value: (col: string, acc: string) => string, c0 = 'c0', acc = 'acc[i]'): string {
  if (lanes === 1) {
    return [
      '      for (var j = 0u; j < 4u; j++) {',
      `        let c = ${c0} + j;`,
      '        if (c < p.n) {',
      `          out[row + c] = encode_out(${value('c', `${acc}[j]`)});`,
      '        }',
      '      }',
    ].join('\n');
  }
  const bits = 32 / lanes;
  return [
    `      for (var w = 0u; w < ${4 / lanes}u; w++) {`,
    `        let cw = ${c0} + w * ${lanes}u;`,
    '        if (cw < p.n) {',
    '          var word = 0u;',
    `          for (var l = 0u; l < ${lanes}u; l++) {`,
    `            word |= encode_out(${value('cw + l', `${acc}[w * ${lanes}u + l]`)}) << (l * ${bits}u);`,
    '          }',
    `          out[(row + cw) / ${lanes}u] = word;`,
    '        }',
    '      }',
  ].join('\n');
}

/** A register block: rm x rn outputs an invocation. */
interface Blocking {
  readonly rm: number;
  readonly rn: number;
}

/** The store of the whole rm x rn block, unrolled so the accumulators need no dynamic index (they stay registers). */
function blockStoreCode(lanes: number, { rm, rn }: Blocking): string {
  const lines: string[] = [];
  for (let i = 0; i < rm; i++) {
    lines.push('  {', `    let r = row0 + ty * ${rm}u + ${i}u;`, '    if (r < p.m) {', '      let row = out_base + r * p.n;');
    for (let h = 0; h < rn / 4; h++) {
      lines.push(
        `      let c${h} = c0 + ${4 * h}u;`,
        tileStoreCode(lanes, (col, acc) => `epilogue(r, ${col}, ${acc})`, `c${h}`, `acc[${(i * rn) / 4 + h}]`),
      );
    }
    lines.push('    }', '  }');
  }
  return lines.join('\n');
}

const A_TILE_LOAD = [
  '    for (var q = 0u; q < 4u; q++) {',
  '      let idx = t + q * 256u;',
  '      a_tile[idx] = load_a_or_zero(row0 + idx / TK, k0 + idx % TK, a_base);',
  '    }',
].join('\n');

type ATileCode = Record<'A_STORAGE' | 'A_LOAD' | 'A_REGISTERS' | 'SUBGROUP_BUILTINS', string> & {
  /** The multiply-adds of K step `kk` (a constant: the K loop is unrolled). */
  step: (kk: number) => string;
};

/**
 * The plain variant's register block (rows x columns an invocation; multiples of 4, dividing 64). 8x8 (64
 * invocations) halved the instructions per multiply-add against 4x4 on SwiftShader; 8x16 and 16x16 measured a
 * little better there but leave GPUs 32 or 16 invocations a workgroup. The bench may change it (it is in the key).
 */
export const plainBlocking = { rm: 8, rn: 8 };

/** A sharing variant's name: 'sg0' (the plain tile), else `sg${width}direct` or `sg${width}staged`. */
function sharingOf(name: string): { width: number; direct: boolean } {
  const m = /^sg(\d+)(direct|staged)?$/.exec(name);
  if (!m) throw new Error(`gemm: unknown A sharing ${name}`);
  return { width: Number(m[1]), direct: m[2] === 'direct' };
}

const GEMM_VARIANT = { a: 'dtype', b: 'dtype', out: 'dtype', ...SCALING_VARIANT, rm: 'number', rn: 'number', sharing: 'string' } as const;
type GemmVariant = VariantOf<typeof GEMM_VARIANT>;

/**
 * How the A tile reaches the invocations, as WGSL snippets for gemm.wgsl. Sharing width 0: the plain variant, rm x
 * rn blocks from an A tile stored transposed ([TK][TM / 4] vec4s, so one load gives 4 rows at one k). Otherwise 4x4
 * blocks and the 16 invocations of a row group (same ty, consecutive t),
 * which all need the same 4 rows x 16 k of A, split them within aligned groups of `width` lanes (these lie inside
 * one subgroup, see GpuContext.subgroupShareWidth): lane l holds a_reg[j][i] = A[row i][k = j * width + l] and
 * broadcasts it with one vec4 shuffle per k, so the register index (k / width) and the source lane (k % width) are
 * the same for every lane. `direct` (16 lanes, see gemmTuning): a row group loads its A values straight from global
 * memory, once, and the A tile leaves workgroup memory. Narrower groups would each load the same values (16 / width
 * times the global reads), so there the tile stays, filled as before, and each lane reads only its 64 / width values
 * from it instead of 64.
 */
function aTileCode(v: GemmVariant): ATileCode {
  const { width, direct } = sharingOf(v.sharing);
  if (width === 0) {
    const { rm, rn } = v;
    return {
      A_STORAGE: 'var<workgroup> a_tile: array<vec4<f32>, 256>; // [TK][TM / 4]: A transposed',
      A_LOAD: [
        '    for (var q = 0u; q < 256u / WG; q++) {',
        '      let idx = t + q * WG;',
        '      a_tile[(idx % 16u) * 16u + idx / 16u] = load_a4(a_base, row0 + (idx / 16u) * 4u, k0 + idx % 16u, inside);',
        '    }',
      ].join('\n'),
      A_REGISTERS: '',
      // Rows ty * rm.. are the vec4s ty * rm / 4.. of a k row of a_tile; columns tx * rn.. those of b_tile.
      step: (kk) => {
        const lines: string[] = [];
        for (let i = 0; i < rm / 4; i++) lines.push(`    let a${kk}_${i} = a_tile[${kk * 16 + i}u + ty * ${rm / 4}u];`);
        for (let i = 0; i < rn / 4; i++) lines.push(`    let b${kk}_${i} = b_tile[${kk * 16 + i}u + tx * ${rn / 4}u];`);
        for (let i = 0; i < rm; i++) {
          for (let h = 0; h < rn / 4; h++) lines.push(`    acc[${(i * rn) / 4 + h}] += a${kk}_${i >> 2}[${i & 3}] * b${kk}_${h};`);
        }
        return lines.join('\n');
      },
      SUBGROUP_BUILTINS: '',
    };
  }
  const regs = (value: string) =>
    [
      '    var a_reg: array<vec4<f32>, TK / SW>;',
      '    for (var j = 0u; j < TK / SW; j++) {',
      '      let kj = j * SW + t % SW;',
      '      for (var i = 0u; i < 4u; i++) {',
      `        a_reg[j][i] = ${value};`,
      '      }',
      '    }',
    ].join('\n');
  return {
    A_STORAGE: direct ? '' : 'var<workgroup> a_tile: array<f32, 1024>; // [TM][TK]',
    A_LOAD: direct ? regs('load_a_or_zero(row0 + ty * 4u + i, k0 + kj, a_base)') : A_TILE_LOAD,
    A_REGISTERS: direct ? '' : regs('a_tile[(ty * 4u + i) * TK + kj]'),
    // Every lane reaches this shuffle (uniform loops, no early exit), as subgroup operations require.
    step: (kk) =>
      [
        `    let b${kk} = b_tile[${kk * 16}u + tx];`,
        `    let a${kk} = subgroupShuffle(a_reg[${kk} / SW], sg_lane - sg_lane % SW + ${kk}u % SW);`,
        ...[0, 1, 2, 3].map((i) => `    acc[${i}] += a${kk}[${i}] * b${kk};`),
      ].join('\n'),
    SUBGROUP_BUILTINS: ', @builtin(subgroup_invocation_id) sg_lane: u32',
  };
}

const gemm = defineKernel({
  name: 'gemm',
  source: 'gemm.wgsl',
  variant: GEMM_VARIANT,
  params: {
    m: 'u32',
    n: 'u32',
    k: 'u32',
    batch_rank: 'u32',
    a_off: 'u32',
    a_sm: 'u32',
    a_sk: 'u32',
    b_off: 'u32',
    b_sk: 'u32',
    b_sn: 'u32',
    k_blocks: 'u32', // ceil(k / 128): row length of block-scale tables
    ...INT4_PARAMS,
    batch_shape: 'u32[4]',
    a_sbatch: 'u32[4]',
    b_sbatch: 'u32[4]',
  },
  outputs: { out: { packed: 'out', saturate: true } },
  inputs: { a: { packed: 'a' }, b: { packed: 'b' }, ...SCALING_INPUTS },
  grid: 'custom',
  // A 64x64 output tile per workgroup.
  workgroupSize: (v) => (TILE / v.rm) * (TILE / v.rn),
  enables: (v) => (sharingOf(v.sharing).width ? ['subgroups'] : []),
  constants: (v) => {
    const { width } = sharingOf(v.sharing);
    return { RM: v.rm, RN: v.rn, ...(width ? { SW: width } : {}) };
  },
  functions: (v) => operandLoads(v) + epilogueWgsl(v),
  code: (v) => {
    const { step, ...code } = aTileCode(v);
    return {
      ...code,
      MULTIPLY: Array.from({ length: 16 }, (_, kk) => step(kk)).join('\n'),
      STORE: blockStoreCode(lanesPerWord(v.out), v),
    };
  },
});

/**
 * directALoadWidth: sharing width from which A skips workgroup memory (16: whole row groups). minShareWidth:
 * narrowest sharing used at all; 16 by default because the staged variant (narrower groups) measured slower than the
 * plain tile on SwiftShader (docs/benchmarks.md) and is unmeasured on GPUs. Tests and the bench lower them to cover
 * and time those paths on adapters with narrower subgroups (SwiftShader's are 4 lanes).
 */
export const gemmTuning = { directALoadWidth: 16, minShareWidth: 16 };

/**
 * Lanes that share A values in the tiled GEMM: 0 (no subgroups, or groups under 4 lanes, where each lane would
 * hold 16 or more vec4 registers) selects the workgroup-memory A tile.
 */
export function gemmShareWidth(ctx: GpuContext): number {
  const w = ctx.subgroupShareWidth(16);
  return w >= Math.max(4, gemmTuning.minShareWidth) ? w : 0;
}

/**
 * [...batch, m, k] @ [...batch, k, n] -> contiguous [...batch, m, n] in outDtype, accumulating in f32, with
 * optional dequantization scales, bias and result scale.
 */
export function gemmKernel(ctx: GpuContext, a: GpuOperand, b: GpuOperand, dims: MatmulDims, outDtype: DType, scaling: GemmScaling = {}): GpuBuffer {
  const { m, n, k } = dims;
  const lanes = lanesPerWord(outDtype);
  if (lanes > 1 && n % lanes !== 0) {
    // Rows would split packed words between workgroups.
    return viaFloat32(ctx, [...dims.batch, m, n], outDtype, true, () => gemmKernel(ctx, a, b, dims, 'float32', scaling));
  }
  const batchCount = numel(dims.batch);
  const out = ctx.alloc(wordBytes(batchCount * m * n, lanes));
  if (batchCount * m * n === 0) return out;
  const r = dims.batch.length;
  const [ba, bb] = coalesceViews([
    { shape: dims.batch, strides: a.view.strides.slice(0, r), offset: 0 },
    { shape: dims.batch, strides: b.view.strides.slice(0, r), offset: 0 },
  ]);
  if (ba.shape.length > 4) throw new ShapeError(`matmul supports at most 4 non-mergeable batch dims, got batch ${formatShape(dims.batch)}`);
  if (batchCount > ctx.limits.maxComputeWorkgroupsPerDimension) {
    throw new ShapeError(`matmul batch of ${batchCount} exceeds the device limit of ${ctx.limits.maxComputeWorkgroupsPerDimension}`);
  }
  const width = gemmShareWidth(ctx);
  const sharing = width === 0 ? 'sg0' : `sg${width}${width >= gemmTuning.directALoadWidth ? 'direct' : 'staged'}`;
  const { rm, rn } = width === 0 ? plainBlocking : { rm: 4, rn: 4 };
  const as = a.view.strides;
  const bs = b.view.strides;
  gemm.run(
    ctx,
    { a: a.dtype, b: b.dtype, out: outDtype, ...scalingVariant(scaling), rm, rn, sharing },
    {
      m,
      n,
      k,
      batch_rank: ba.shape.length,
      a_off: a.view.offset,
      a_sm: as[r],
      a_sk: as[r + 1],
      b_off: b.view.offset,
      b_sk: bs[r],
      b_sn: bs[r + 1],
      k_blocks: Math.ceil(k / 128),
      ...int4Params(scaling, k),
      batch_shape: ba.shape,
      a_sbatch: ba.strides,
      b_sbatch: bb.strides,
    },
    { out, a: a.buffer, b: b.buffer, ...scalingBuffers(scaling) },
    // Each operand once (the compulsory traffic; tiles re-read from caches are not counted).
    {
      workgroups: [Math.ceil(n / TILE), Math.ceil(m / TILE), batchCount],
      bytes: batchCount * (bytesOf(a.dtype, m * k) + weightBytes(b.dtype, scaling, n, k) + bytesOf(outDtype, m * n)),
    },
  );
  return out;
}
