// Launcher of the decode GEMV over a [K, N] weight (gemv-kn.wgsl): M <= 4 rows times a weight whose N dim is
// contiguous, which the [N, K] GEMV (gemv.ts) cannot read and the tiled GEMM would run with 63 of every 64 tile rows
// empty. Every dtype, scaling and epilogue of the GEMM (FP8 tensor/row/block scales, bias, scaleResult, residual).
import { DTYPE_INFO, isFp8, lanesPerWord, type DType } from '../../core/dtype.js';
import { batchInvariant } from '../../core/batch-invariance.js';
import type { MatmulDims } from '../../runtime/backend.js';
import { wordBytes, type GpuBuffer, type GpuContext } from '../../runtime/webgpu/gpu-context.js';
import { viaFloat32, type GpuOperand } from '../../runtime/webgpu/kernels/elementwise.js';
import { bytesOf, defineKernel, type VariantOf } from '../../runtime/webgpu/kernels/kernel.js';
import { decodeFn, grid1d } from '../../runtime/webgpu/kernels/wgsl.js';
import { epilogueWgsl, SCALING_INPUTS, SCALING_VARIANT, scalingBuffers, scalingVariant, type GemmScaling } from './gemm.js';
import { GEMV_MAX_M } from './gemv.js';

const WORKGROUP = 256;
/**
 * Workgroups the split-K aims for: KL doubles (fewer column groups a workgroup) until the grid has this many, so a
 * GPU's compute units all stream weight rows even for N = 1024..4096. A software adapter runs workgroups on its few
 * CPU threads and is indifferent to it as long as there are more than threads, so one rule serves both.
 */
const TARGET_WORKGROUPS = 64;

/** Tuning the tests and the bench may change (KL is in the pipeline key). */
export const gemvKnTuning = { enabled: true, targetWorkgroups: TARGET_WORKGROUPS };

/** True when gemvKnKernel can run this product: [m <= 4, k] x [k, n] with n contiguous in the weight. */
export function gemvKnApplies(b: GpuOperand, dims: MatmulDims): boolean {
  // Batch-invariant mode keeps every row count on the GEMM, whose sums do not depend on m (core/batch-invariance.ts).
  if (!gemvKnTuning.enabled || batchInvariant() || dims.batch.length > 0 || dims.m === 0 || dims.m > GEMV_MAX_M) return false;
  return b.view.strides[1] === 1 || dims.n === 1;
}

/** Whole 16-byte chunks: rows start 16-byte aligned and the buffer holds every chunk the columns touch. */
function chunked(b: GpuOperand, dims: MatmulDims): boolean {
  const item = DTYPE_INFO[b.dtype].itemBytes;
  const per = 16 / item;
  const [sk] = b.view.strides;
  const end = (b.view.offset + (dims.k - 1) * sk + Math.ceil(dims.n / per) * per) * item;
  return b.view.strides[1] === 1 && (sk * item) % 16 === 0 && (b.view.offset * item) % 16 === 0 && end <= b.buffer.buffer.size;
}

const GEMV_KN_VARIANT = { m: 'number', kl: 'number', chunks: 'boolean', a: 'dtype', b: 'dtype', out: 'dtype', ...SCALING_VARIANT } as const;
type GemvKnVariant = VariantOf<typeof GEMV_KN_VARIANT>;

/** Output columns an invocation: a 16-byte chunk of a weight row, or 4 read one by one. */
const cpiOf = (v: GemvKnVariant) => (v.chunks ? 16 / DTYPE_INFO[v.b].itemBytes : 4);
const blockScaled = (v: GemvKnVariant) => v.scaleA === 'block' || v.scaleB === 'block';

function functions(v: GemvKnVariant): string {
  const lut = isFp8(v.b) && v.chunks;
  const lutA = lut && v.a === v.b;
  const loadA = (r: number) => (lutA ? `fp8_lut[code_x(p.a_off + ${r}u * p.a_sm + k * p.a_sk)]` : `load_x(p.a_off + ${r}u * p.a_sm + k * p.a_sk)`);
  const rows = [0, 1, 2, 3].map((r) => (r < v.m ? loadA(r) : '0.0'));
  const aScale = (r: number) => (v.scaleA !== 'block' ? '1.0' : r < v.m ? `scale_a[${r}u * p.k_blocks + k / 128u]` : '0.0');
  const bScale = v.scaleB === 'block' ? 'scale_b[(n / 128u) * p.k_blocks + k / 128u]' : '1.0';
  return [
    // FP8 codes decode through a 256-entry table in workgroup memory, as in the [N, K] GEMV.
    lut ? 'var<workgroup> fp8_lut: array<f32, 256>;\nfn decode_w(code: u32) -> f32 {\n  return fp8_lut[code];\n}\n' : decodeFn('decode_w', v.b, 'f32'),
    `fn a_vec(k: u32) -> vec4<f32> {\n  return vec4<f32>(${rows.join(', ')});\n}\n`,
    // The CPI columns of an invocation start at a multiple of CPI, which divides 128: one block column of scale_b.
    blockScaled(v) ? `fn block_scale(n: u32, k: u32) -> vec4<f32> {\n  return vec4<f32>(${[0, 1, 2, 3].map(aScale).join(', ')}) * ${bScale};\n}\n` : '',
    epilogueWgsl(v),
  ].join('\n');
}

function accumulate(v: GemvKnVariant): string {
  const cpi = cpiOf(v);
  if (!v.chunks) {
    return Array.from(
      { length: cpi },
      (_, j) => `      if (n0 + ${j}u < p.n) {\n        acc${j} += load_w(p.b_off + k * p.b_sk + n0 + ${j}u) * av;\n      }`,
    ).join('\n');
  }
  const lanes = lanesPerWord(v.b);
  const bits = 32 / lanes;
  const lines = ['      let chunk = w[p.b_off + k * p.b_sk + g];'];
  for (let word = 0; word < 4; word++) {
    for (let l = 0; l < lanes; l++) {
      const code = lanes === 1 ? `chunk[${word}]` : `(chunk[${word}] >> ${l * bits}u) & ${(2 ** bits - 1) >>> 0}u`;
      lines.push(`      acc${word * lanes + l} += decode_w(${code}) * av;`);
    }
  }
  return lines.join('\n');
}

/**
 * Column by column: the KL partials meet in red through a fixed tree and lane 0 keeps the sum; then lane 0 of each
 * column group stores its CPI columns for rows 0..m-1, whole words at a time for packed outputs.
 */
function reduceStore(v: GemvKnVariant): string {
  const cpi = cpiOf(v);
  const lines: string[] = [];
  for (let j = 0; j < cpi; j++) {
    lines.push(
      `  red[lid.x] = acc${j};`,
      '  workgroupBarrier();',
      '  for (var s = KL / 2u; s > 0u; s >>= 1u) {',
      '    if (kl < s) {',
      '      red[lid.x] += red[lid.x + s * CG];',
      '    }',
      '    workgroupBarrier();',
      '  }',
      `  let res${j} = red[lid.x];`,
      '  workgroupBarrier();',
    );
  }
  const lanes = lanesPerWord(v.out);
  lines.push('  if (kl == 0u && g < p.groups) {');
  for (let r = 0; r < v.m; r++) {
    for (let w = 0; w < cpi / lanes; w++) {
      const nw = `n0 + ${w * lanes}u`;
      // n is a multiple of lanes here (else the launcher computes float32 and casts), so a word is whole.
      lines.push(`    if (${nw} < p.n) {`);
      if (lanes === 1) {
        lines.push(`      out[${r}u * p.n + ${nw}] = encode_out(epilogue(${r}u, ${nw}, res${w}[${r}]));`);
      } else {
        const parts = Array.from(
          { length: lanes },
          (_, l) => `(encode_out(epilogue(${r}u, ${nw} + ${l}u, res${w * lanes + l}[${r}])) << ${(l * 32) / lanes}u)`,
        );
        lines.push(`      out[(${r}u * p.n + ${nw}) / ${lanes}u] = ${parts.join(' | ')};`);
      }
      lines.push('    }');
    }
  }
  lines.push('  }');
  return lines.join('\n');
}

const gemvKn = defineKernel({
  name: 'gemv-kn',
  source: 'gemv-kn.wgsl',
  variant: GEMV_KN_VARIANT,
  params: {
    n: 'u32',
    k: 'u32',
    a_off: 'u32',
    a_sm: 'u32',
    a_sk: 'u32',
    b_off: 'u32', // weight offset: in 16-byte chunks when chunked, else in elements
    b_sk: 'u32', // weight row stride, in the same unit
    k_blocks: 'u32', // ceil(k / 128)
    groups: 'u32', // column groups: ceil(n / CPI)
  },
  outputs: { out: { packed: 'out', saturate: true } },
  inputs: { x: { packed: 'a' }, w: { type: (v) => (v.chunks ? 'vec4<u32>' : 'u32'), packed: 'b' }, ...SCALING_INPUTS },
  grid: 'custom',
  workgroupSize: WORKGROUP,
  constants: (v) => ({ CPI: cpiOf(v), KL: v.kl, CG: WORKGROUP / v.kl }),
  functions,
  code: (v) => ({
    LUT_FILL: isFp8(v.b) && v.chunks ? `  fp8_lut[lid.x] = ${v.b === 'float8_e4m3fn' ? 'e4m3_to_f32' : 'e5m2_to_f32'}(lid.x);\n  workgroupBarrier();` : '',
    DECLARE: Array.from({ length: cpiOf(v) }, (_, j) => `  var acc${j} = vec4<f32>(0.0);`).join('\n'),
    BLOCK_SCALE: blockScaled(v) ? ' * block_scale(n0, k)' : '',
    ACCUMULATE: accumulate(v),
    REDUCE_STORE: reduceStore(v),
  }),
});

/** K lanes a workgroup (4..64, a power of two): doubled while the grid has fewer than the target workgroups. */
function kLanes(groups: number, k: number): number {
  let kl = 4;
  while (kl < 64 && kl * 2 <= Math.max(4, k) && Math.ceil(groups / (WORKGROUP / kl)) < gemvKnTuning.targetWorkgroups) kl *= 2;
  return kl;
}

/** [m, k] @ [k, n] (b with n contiguous) for m <= 4 -> contiguous [m, n] in outDtype, with the GEMM's scalings. */
export function gemvKnKernel(ctx: GpuContext, a: GpuOperand, b: GpuOperand, dims: MatmulDims, outDtype: DType, s: GemmScaling = {}): GpuBuffer {
  const { m, n, k } = dims;
  const lanes = lanesPerWord(outDtype);
  if (lanes > 1 && n % lanes !== 0) {
    return viaFloat32(ctx, [m, n], outDtype, true, () => gemvKnKernel(ctx, a, b, dims, 'float32', s));
  }
  const out = ctx.alloc(wordBytes(m * n, lanes));
  if (m * n === 0) return out;
  const item = DTYPE_INFO[b.dtype].itemBytes;
  const chunks = chunked(b, dims);
  const cpi = chunks ? 16 / item : 4;
  const groups = Math.ceil(n / cpi);
  const kl = kLanes(groups, k);
  const unit = chunks ? 16 / item : 1;
  gemvKn.run(
    ctx,
    { m, kl, chunks, a: a.dtype, b: b.dtype, out: outDtype, ...scalingVariant(s) },
    {
      n,
      k,
      a_off: a.view.offset,
      a_sm: a.view.strides[0],
      a_sk: a.view.strides[1],
      b_off: b.view.offset / unit,
      b_sk: b.view.strides[0] / unit,
      k_blocks: Math.ceil(k / 128),
      groups,
    },
    { out, x: a.buffer, w: b.buffer, ...scalingBuffers(s) },
    {
      workgroups: grid1d(Math.ceil(groups / (WORKGROUP / kl)) * WORKGROUP, WORKGROUP),
      bytes: bytesOf(b.dtype, n * k) + bytesOf(a.dtype, m * k) + bytesOf(outDtype, m * n),
    },
  );
  return out;
}
