// Launcher of the tiled GEMM (gemm.wgsl): plain matmul and FP8 scaledMm share it; they differ only in the
// generated load/epilogue functions.
import { lanesPerWord, type DType } from '../../../core/dtype.js';
import { ShapeError } from '../../../core/errors.js';
import { coalesceViews, formatShape, numel } from '../../../core/shape.js';
import type { MatmulDims } from '../../backend.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../gpu-context.js';
import { viaFloat32, type GpuOperand } from './elementwise.js';
import { commonWgsl, encodeFn, fillTemplate, loadFn, wgslSource } from './wgsl.js';

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
}

function scaleTerm(name: string, recipe: ScaleRecipe | undefined, index: string): string {
  if (!recipe || recipe === 'block') return '';
  return recipe === 'tensor' ? ` * ${name}[0]` : ` * ${name}[${index}]`;
}

/** The optional buffers of a scaled matmul, in binding order after out, a and b. */
export function scalingBuffers(s: GemmScaling): [name: string, buffer: GpuBuffer][] {
  const extras: [string, GpuBuffer][] = [];
  if (s.scaleA) extras.push(['scale_a', s.scaleA.buffer]);
  if (s.scaleB) extras.push(['scale_b', s.scaleB.buffer]);
  if (s.bias) extras.push(['bias', s.bias.buffer]);
  if (s.scaleResult) extras.push(['scale_result', s.scaleResult]);
  if (s.residual) extras.push(['residual', s.residual.buffer]);
  return extras;
}

/** WGSL declarations of scalingBuffers from binding 4 on. */
export function scalingBindings(extras: readonly [string, GpuBuffer][]): string {
  return extras.map(([name], i) => `@group(0) @binding(${4 + i}) var<storage, read> ${name}: array<${name === 'bias' || name === 'residual' ? 'u32' : 'f32'}>;`).join('\n');
}

/**
 * `epilogue(m, n, acc)` (tensor/row scales, bias, result scale; block scales apply on load instead, as they vary
 * along K) and `encode_out`. FP8 outputs saturate, as cuBLASLt's scaled GEMMs do, rather than overflow to NaN.
 */
export function epilogueWgsl(s: GemmScaling, outDtype: DType): string {
  return [
    s.bias ? loadFn('load_bias', 'bias', s.bias.dtype, 'f32') : '',
    s.residual ? loadFn('load_residual', 'residual', s.residual.dtype, 'f32') : '',
    'fn epilogue(m: u32, n: u32, v: f32) -> f32 {',
    `  var r = v${scaleTerm('scale_a', s.scaleA?.recipe, 'm')}${scaleTerm('scale_b', s.scaleB?.recipe, 'n')};`,
    s.bias ? '  r += load_bias(n);' : '',
    s.scaleResult ? '  r *= scale_result[0];' : '',
    s.residual ? '  r += load_residual(m * p.n + n);' : '',
    '  return r;',
    '}',
    encodeFn('encode_out', outDtype, 'f32', true),
  ].join('\n');
}

function functions(a: GpuOperand, b: GpuOperand, outDtype: DType, s: GemmScaling): string {
  const ra = s.scaleA?.recipe;
  const rb = s.scaleB?.recipe;
  // Block scales vary along K, so they apply per element on load; the others factor out into the epilogue.
  const loadA = `fn load_a(i: u32, m: u32, k: u32) -> f32 {\n  return load0(i)${ra === 'block' ? ' * scale_a[m * p.k_blocks + k / 128u]' : ''};\n}\n`;
  const loadB = `fn load_b(i: u32, k: u32, n: u32) -> f32 {\n  return load1(i)${rb === 'block' ? ' * scale_b[(n / 128u) * p.k_blocks + k / 128u]' : ''};\n}\n`;
  return loadFn('load0', 'in0', a.dtype, 'f32') + loadFn('load1', 'in1', b.dtype, 'f32') + loadA + loadB + epilogueWgsl(s, outDtype);
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

/** A GEMM variant's register block (rm x rn outputs an invocation) and workgroup size. */
interface Blocking {
  rm: number;
  rn: number;
  wg: number;
}

/** The store of the whole rm x rn block, unrolled so the accumulators need no dynamic index (they stay registers). */
function blockStoreCode(lanes: number, { rm, rn }: Blocking): string {
  const lines: string[] = [];
  for (let i = 0; i < rm; i++) {
    lines.push('  {', `    let r = row0 + ty * ${rm}u + ${i}u;`, '    if (r < p.m) {', '      let row = out_base + r * p.n;');
    for (let h = 0; h < rn / 4; h++) {
      lines.push(`      let c${h} = c0 + ${4 * h}u;`, tileStoreCode(lanes, (col, acc) => `epilogue(r, ${col}, ${acc})`, `c${h}`, `acc[${(i * rn) / 4 + h}]`));
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
  blocking: Blocking;
  /** The multiply-adds of K step `kk` (a constant: the K loop is unrolled). */
  step: (kk: number) => string;
};

/**
 * The plain variant's register block (rows x columns an invocation; multiples of 4, dividing 64). 8x8 (64
 * invocations) halved the instructions per multiply-add against 4x4 on SwiftShader; 8x16 and 16x16 measured a
 * little better there but leave GPUs 32 or 16 invocations a workgroup. The bench may change it (it is in the key).
 */
export const plainBlocking = { rm: 8, rn: 8 };

/**
 * How the A tile reaches the invocations, as WGSL snippets for gemm.wgsl. `width` 0: the plain variant, 8x8 blocks
 * from an A tile stored transposed ([TK][TM / 4] vec4s, so one load gives 4 rows at one k). Otherwise 4x4 blocks
 * and the 16 invocations of a row group (same ty, consecutive t),
 * which all need the same 4 rows x 16 k of A, split them within aligned groups of `width` lanes (these lie inside
 * one subgroup, see GpuContext.subgroupShareWidth): lane l holds a_reg[j][i] = A[row i][k = j * width + l] and
 * broadcasts it with one vec4 shuffle per k, so the register index (k / width) and the source lane (k % width) are
 * the same for every lane. `direct` (16 lanes, see gemmTuning): a row group loads its A values straight from global
 * memory, once, and the A tile leaves workgroup memory. Narrower groups would each load the same values (16 / width
 * times the global reads), so there the tile stays, filled as before, and each lane reads only its 64 / width values
 * from it instead of 64.
 */
function aTileCode(width: number, direct: boolean): ATileCode {
  if (width === 0) {
    const { rm, rn } = plainBlocking;
    const blocking = { rm, rn, wg: (64 / rm) * (64 / rn) };
    return {
      blocking,
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
        for (let v = 0; v < rm / 4; v++) lines.push(`    let a${kk}_${v} = a_tile[${kk * 16 + v}u + ty * ${rm / 4}u];`);
        for (let v = 0; v < rn / 4; v++) lines.push(`    let b${kk}_${v} = b_tile[${kk * 16 + v}u + tx * ${rn / 4}u];`);
        for (let i = 0; i < rm; i++) {
          for (let h = 0; h < rn / 4; h++) lines.push(`    acc[${(i * rn) / 4 + h}] += a${kk}_${i >> 2}[${i & 3}] * b${kk}_${h};`);
        }
        return lines.join('\n');
      },
      SUBGROUP_BUILTINS: '',
    };
  }
  const tileDecl = 'var<workgroup> a_tile: array<f32, 1024>; // [TM][TK]';
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
    blocking: { rm: 4, rn: 4, wg: 256 },
    A_STORAGE: `const SW = ${width}u; // lanes sharing A values\n${direct ? '' : tileDecl}`,
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

/**
 * The sharing width from which A is loaded straight into registers (16: whole row groups). Tests lower it to run
 * that path on adapters with narrower subgroups (SwiftShader's are 4 lanes).
 */
/**
 * directALoadWidth: sharing width from which A skips workgroup memory. minShareWidth: narrowest sharing used at all;
 * 16 by default because the staged variant (narrower groups) measured slower than the plain tile on SwiftShader
 * (docs/benchmarks.md) and is unmeasured on GPUs. Tests and the bench lower it to cover and time that path.
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
  const extras = scalingBuffers(scaling);
  const share = gemmShareWidth(ctx);
  const direct = share >= gemmTuning.directALoadWidth;
  const variant = share === 0 ? 'sg0' : `sg${share}${direct ? 'direct' : 'staged'}`;
  const block = share === 0 ? `${plainBlocking.rm}x${plainBlocking.rn}` : '4x4';
  const key = ['gemm', a.dtype, b.dtype, outDtype, scaling.scaleA?.recipe, scaling.scaleB?.recipe, scaling.bias?.dtype, !!scaling.scaleResult, scaling.residual?.dtype, block, variant].join('|');
  const pipeline = ctx.pipeline(key, () => {
    const code = aTileCode(share, direct);
    return (share ? 'enable subgroups;\n' : '') +
    commonWgsl() +
    fillTemplate(wgslSource(import.meta.url, 'gemm.wgsl'), {
      EXTRA_BINDINGS: scalingBindings(extras),
      FUNCTIONS: functions(a, b, outDtype, scaling),
      A_STORAGE: code.A_STORAGE,
      A_LOAD: code.A_LOAD,
      A_REGISTERS: code.A_REGISTERS,
      SUBGROUP_BUILTINS: code.SUBGROUP_BUILTINS,
      WG: code.blocking.wg,
      RM: code.blocking.rm,
      RN: code.blocking.rn,
      MULTIPLY: Array.from({ length: 16 }, (_, kk) => code.step(kk)).join('\n'),
      STORE: blockStoreCode(lanes, code.blocking),
    });
  });
  const u = new Uint32Array(24);
  const as = a.view.strides;
  const bs = b.view.strides;
  u.set([m, n, k, ba.shape.length, a.view.offset, as[r], as[r + 1], b.view.offset, bs[r], bs[r + 1], Math.ceil(k / 128)]);
  ba.shape.forEach((s, d) => (u[12 + d] = s));
  ba.strides.forEach((s, d) => (u[16 + d] = s));
  bb.strides.forEach((s, d) => (u[20 + d] = s));
  ctx.dispatch(pipeline, u.buffer, [out, a.buffer, b.buffer, ...extras.map(([, buf]) => buf)], [Math.ceil(n / TILE), Math.ceil(m / TILE), batchCount]);
  return out;
}
