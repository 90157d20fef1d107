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
  return extras;
}

/** WGSL declarations of scalingBuffers from binding 4 on. */
export function scalingBindings(extras: readonly [string, GpuBuffer][]): string {
  return extras.map(([name], i) => `@group(0) @binding(${4 + i}) var<storage, read> ${name}: array<${name === 'bias' ? 'u32' : 'f32'}>;`).join('\n');
}

/**
 * `epilogue(m, n, acc)` (tensor/row scales, bias, result scale; block scales apply on load instead, as they vary
 * along K) and `encode_out`. FP8 outputs saturate, as cuBLASLt's scaled GEMMs do, rather than overflow to NaN.
 */
export function epilogueWgsl(s: GemmScaling, outDtype: DType): string {
  return [
    s.bias ? loadFn('load_bias', 'bias', s.bias.dtype, 'f32') : '',
    'fn epilogue(m: u32, n: u32, v: f32) -> f32 {',
    `  var r = v${scaleTerm('scale_a', s.scaleA?.recipe, 'm')}${scaleTerm('scale_b', s.scaleB?.recipe, 'n')};`,
    s.bias ? '  r += load_bias(n);' : '',
    s.scaleResult ? '  r *= scale_result[0];' : '',
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
 * WGSL storing an invocation's 4x4 block row i (columns c0..c0+3 of output row `row`): `value(col, acc)` turns a
 * column's accumulator into the stored value. Packed dtypes write whole words (n is a multiple of lanes here).
 */
export function tileStoreCode(lanes: number, value: (col: string, acc: string) => string): string {
  if (lanes === 1) {
    return [
      '      for (var j = 0u; j < 4u; j++) {',
      '        let c = c0 + j;',
      '        if (c < p.n) {',
      `          out[row + c] = encode_out(${value('c', 'acc[i][j]')});`,
      '        }',
      '      }',
    ].join('\n');
  }
  const bits = 32 / lanes;
  return [
    `      for (var w = 0u; w < ${4 / lanes}u; w++) {`,
    `        let cw = c0 + w * ${lanes}u;`,
    '        if (cw < p.n) {',
    '          var word = 0u;',
    `          for (var l = 0u; l < ${lanes}u; l++) {`,
    `            word |= encode_out(${value('cw + l', `acc[i][w * ${lanes}u + l]`)}) << (l * ${bits}u);`,
    '          }',
    `          out[(row + cw) / ${lanes}u] = word;`,
    '        }',
    '      }',
  ].join('\n');
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
  const key = ['gemm', a.dtype, b.dtype, outDtype, scaling.scaleA?.recipe, scaling.scaleB?.recipe, scaling.bias?.dtype, !!scaling.scaleResult].join('|');
  const pipeline = ctx.pipeline(key, () =>
    commonWgsl() +
    fillTemplate(wgslSource(import.meta.url, 'gemm.wgsl'), {
      EXTRA_BINDINGS: scalingBindings(extras),
      FUNCTIONS: functions(a, b, outDtype, scaling),
      STORE: tileStoreCode(lanes, (col, acc) => `epilogue(r, ${col}, ${acc})`),
    }),
  );
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
